// The open files a run may use. A node in flight holds descriptors of its
// own only while a thread works for it (a pooled session's socket, an image
// or log file): a parked wait holds none but its idle connection, which
// the HTTP client's pool may close (before the pool, bench/redfish part s
// parked 4,900 nodes in Redfish task polls on 58 open files). So the limit
// bounds the engine's threads and the idle connections, not `parallel`:
// the soft RLIMIT_NOFILE is raised to the hard limit at the start of a run,
// and the pool never grows past the threads that limit covers; nodes beyond
// them wait for a thread when their stages block. A limit that cannot
// cover even the pool's core refuses the run.
//
// Idle HTTP connections are open files too (3 each: core/
// idle_connection_budget.h): the HTTP client keeps them in one process-wide
// pool between a node's requests, across its parks (net/http_client.h),
// within idle_connection_budget(). The limit is split: the base, then up to
// four fifths of the rest for idle connections (2 per node in flight: its
// BMC and a switch; a parked node needs no thread but wants its
// connection), then the threads; the idle share shrinks first when the
// threads' core would not fit. Nodes polling in turn beyond the idle share
// find their connections evicted (LRU) and reconnect, as before the pool.
#pragma once

#include <string>

#include "provisioner/core/idle_connection_budget.h"
#include "provisioner/core/result.h"

namespace kiln::engine {

// Descriptors budgeted per worker thread (issue 20 measured about 3.7 per
// blocking node at parallel = 1000) and for the process itself (journal,
// listeners, the artifact server, logs).
inline constexpr long kFilesPerThread = 4;
inline constexpr long kFilesBase = 64;
// Idle connections worth keeping per node in flight, and in all (5,000
// BMCs polled every few seconds reuse 5,000).
inline constexpr long kIdleConnectionsPerNode = 2;
inline constexpr long kIdleConnectionsMax = 16384;

// The worker threads an open-file limit covers, with no idle connections
// kept (0 when not even one).
long threads_for_open_files(long limit);

struct OpenFilePlan {
    int threads = 0;            // the most the pool may grow to
    long idle_connections = 0;  // the HTTP pool's budget
};

// How `limit` open files split for `in_flight` nodes (above), keeping at
// least `core` threads when the limit covers them at all (threads = 0 when
// it does not). limit < 0: no limit.
OpenFilePlan plan_open_files(long limit, int in_flight, int core);

// Raises the soft limit to the hard limit and returns its plan: threads =
// min(in_flight, what the limit leaves them). `where` names the setting for
// the error message (the fleet file and line of [limits]). Errors:
// engine/limits.open_files, when it covers fewer than `core` threads.
Result<OpenFilePlan> raise_open_file_limit(int in_flight, int core, const std::string& where);

}  // namespace kiln::engine
