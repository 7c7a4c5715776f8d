// The open files a run may use. A node in flight holds descriptors only
// while a thread works for it (a BMC or switch connection, a pooled
// session's socket, an image or log file): a parked wait holds none
// (bench/redfish part s: 4,900 nodes parked in Redfish task polls, 58 open
// files). So the limit bounds the engine's threads, not `parallel`: the
// soft RLIMIT_NOFILE is raised to the hard limit at the start of a run, and
// the pool never grows past the threads that limit covers; nodes beyond
// them wait for a thread when their stages block. A limit that cannot
// cover even the pool's core refuses the run.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::engine {

// Descriptors budgeted per worker thread (issue 20 measured about 3.7 per
// blocking node at parallel = 1000) and for the process itself (journal,
// listeners, the artifact server, logs).
inline constexpr long kFilesPerThread = 4;
inline constexpr long kFilesBase = 64;

// The worker threads an open-file limit covers (0 when not even one).
long threads_for_open_files(long limit);

// Raises the soft limit to the hard limit and returns the most threads the
// pool may grow to: min(in_flight, what the limit covers). `where` names
// the setting for the error message (the fleet file and line of [limits]).
// Errors: engine/limits.open_files, when it covers fewer than `core`.
Result<int> raise_open_file_limit(int in_flight, int core, const std::string& where);

}  // namespace kiln::engine
