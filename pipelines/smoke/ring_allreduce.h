// Ring all-reduce (sum) over float32 vectors on the TCP ring: a
// reduce-scatter, then an all-gather, each n-1 steps, as NCCL's ring does.
// Bus bandwidth uses nccl-tests' formula: busbw = algbw * 2(n-1)/n.
#pragma once

#include <vector>

#include "pipelines/smoke/check.h"
#include "pipelines/smoke/tcp_ring.h"

namespace kiln::smoke {

bool ring_allreduce(TcpRing& ring, std::vector<float>& data, Deadline deadline, std::string* err);

// nccl-tests' bus bandwidth factor for all-reduce.
double allreduce_bus_factor(int ranks);

// The all-reduce checks: "allreduce_errors" (a sum of known vectors,
// compared element by element) and "allreduce_busbw_gbps" (GB/s = 1e9 B/s,
// `bytes` per all-reduce, best of `iterations`).
// `corrupt`: this rank adds wrong values to its contribution (a test hook).
std::vector<Check> allreduce_checks(TcpRing& ring, size_t bytes, int iterations, Deadline deadline,
                                    bool corrupt = false);

}  // namespace kiln::smoke
