// How many idle HTTP connections the process may keep open between
// requests. Idle connections are open files: a run sizes this from the
// open-file limit (engine/open_files.h, beside the worker threads' share)
// and the HTTP client's pool (net/idle_pool.h, net/http_client.cc) evicts
// down to it on its next put. Here, in core, so the engine sets it without
// linking the HTTP transport.
#pragma once

#include <atomic>

namespace kiln {

// Open files one idle connection holds: its socket, and the wakeup
// socketpair of the multi handle a libcurl easy handle keeps for
// curl_easy_perform (measured: 1,000 idle BMC connections, 3,000 files).
inline constexpr long kFilesPerIdleConnection = 3;

// Outside a run (kiln firmware, kiln network, tests): a handful of BMCs and
// switches at a time.
inline constexpr long kDefaultIdleConnections = 64;

inline std::atomic<long>& idle_connection_budget_slot() {
    static std::atomic<long> budget{kDefaultIdleConnections};
    return budget;
}

inline void set_idle_connection_budget(long connections) {
    idle_connection_budget_slot().store(connections < 0 ? 0 : connections, std::memory_order_relaxed);
}

inline long idle_connection_budget() {
    return idle_connection_budget_slot().load(std::memory_order_relaxed);
}

}  // namespace kiln
