// The CPU path's ring all-reduce run in this process: one thread per
// member, a real TcpRing over loopback, the sum of known vectors checked
// element by element. Members named in `corrupt` add a wrong value to what
// they send, as a rank behind a link that drops or flips bits would: the ring
// then fails. fault_search's localisation runs against it in the benchmark
// (bench/smoke) and in a test, so the search is measured on real rings.
#pragma once

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "pipelines/smoke/fault_search.h"

namespace kiln::smoke {

struct LoopbackRingOptions {
    size_t bytes = 1u << 20;  // per all-reduce
    std::set<std::string> corrupt;
    std::chrono::milliseconds timeout{std::chrono::seconds(20)};
    // Each run takes fresh ports from here (TIME_WAIT would refuse reuse).
    std::atomic<int>* next_port = nullptr;
};

// A ring of `members` (two or more); pass when every element of the sum is
// exact on every rank; figure: the slowest rank's bus bandwidth (GB/s).
RingOutcome run_loopback_ring(const std::vector<std::string>& members, const LoopbackRingOptions& options);

}  // namespace kiln::smoke
