// The open-file limit a run needs. Each node in flight may hold a few
// descriptors at once (a BMC or switch connection, a pooled session's
// socket, an image or log file): issue 20 measured about 3.7 per node at
// parallel = 1000. The soft RLIMIT_NOFILE (often 1024) is raised to the
// hard limit at the start of a run; when even the hard limit cannot cover
// the nodes a run may have in flight, the run does not start.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::engine {

// Descriptors budgeted per node in flight, and for the process itself
// (journal, listeners, the artifact server, logs).
inline constexpr long kFilesPerNode = 4;
inline constexpr long kFilesBase = 64;

long open_files_needed(int in_flight);

// Raises the soft limit to the hard limit, then checks it covers
// `in_flight` nodes. `where` names the setting for the error message (the
// fleet file and line of [limits]). Errors: engine/limits.open_files.
Status raise_open_file_limit(int in_flight, const std::string& where);

}  // namespace kiln::engine
