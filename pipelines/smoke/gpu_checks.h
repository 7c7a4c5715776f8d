// The GPU path (built only with CUDA and NCCL: KILN_SMOKE_CUDA). Plain C++
// declarations; the code is in gpu_checks.cu and nvml_loader.cc, which the
// CPU build never compiles.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/tcp_ring.h"
#include "pipelines/smoke/watchdog.h"

namespace kiln::smoke {

struct GpuInventory {
    int count = 0;      // devices CUDA can read
    std::string model;  // device 0's name, e.g. "NVIDIA H200"
    std::vector<std::string> names;
    std::string error;  // why GPUs are missing (no driver, no device, an unreadable device)
};

GpuInventory gpu_inventory();

struct GpuOptions {
    size_t copy_bytes = 256u << 20;  // H2D/D2H and HBM copies
    int gemm_n = 8192;               // bf16 GEMM size (n x n x n)
    size_t nccl_bytes = 256u << 20;  // per all-reduce
    int iterations = 10;
    int train_steps = 200;
    unsigned seed = 1234;
    // Out: the NVML step leaves the GPUs' state here (gpu_state_json),
    // under its lock: a step the watchdog gave up on may still write.
    struct NvmlState {
        std::mutex mu;
        nlohmann::json value;
    };
    std::shared_ptr<NvmlState> nvml_state = std::make_shared<NvmlState>();
};

// One entry per check group: the names it reports (for the watchdog) and
// the function that measures them. The caller runs each under run_bounded.
struct GpuCheckStep {
    std::vector<std::string> names;
    CheckFn run;
};

// `ring` (may be a ring of one) carries the NCCL unique id between VMs.
std::vector<GpuCheckStep> gpu_check_steps(const GpuOptions& options, TcpRing* ring, Deadline ring_deadline);

}  // namespace kiln::smoke
