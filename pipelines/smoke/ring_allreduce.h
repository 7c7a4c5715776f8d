// Ring all-reduce (sum) over float32 vectors on the TCP ring: a
// reduce-scatter, then an all-gather, each n-1 steps, as NCCL's ring does.
// Bus bandwidth uses nccl-tests' formula: busbw = algbw * 2(n-1)/n.
#pragma once

#include <chrono>
#include <vector>

#include "pipelines/smoke/check.h"
#include "pipelines/smoke/tcp_ring.h"

namespace kiln::smoke {

// `step_delay`: waits that long before each of its 2(n-1) steps (a test's
// slow link).
bool ring_allreduce(TcpRing& ring, std::vector<float>& data, Deadline deadline, std::string* err,
                    std::chrono::milliseconds step_delay = std::chrono::milliseconds(0));

// nccl-tests' bus bandwidth factor for all-reduce.
double allreduce_bus_factor(int ranks);

// The all-reduce checks: "allreduce_errors" (a sum of known vectors,
// compared element by element) and "allreduce_busbw_gbps" (GB/s = 1e9 B/s,
// `bytes` per all-reduce, best of `iterations`).
// Faults a test gives one rank (hidden kiln-smoke flags), as a bad part
// behind it would cause.
struct RankFault {
    bool corrupt = false;  // adds wrong values to its contribution (a link that flips bits)
    bool drop = false;     // drops its ring links before the first all-reduce (a link that goes down)
    std::chrono::milliseconds step_delay{0};  // waits this long before each ring step (a slow link)
};

std::vector<Check> allreduce_checks(TcpRing& ring, size_t bytes, int iterations, Deadline deadline,
                                    const RankFault& fault = {});

}  // namespace kiln::smoke
