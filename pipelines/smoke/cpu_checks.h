// The CPU path's local checks: memory bandwidth (a STREAM-style copy), the
// GFLOP/s of a small float32 GEMM, and a tiny MLP trained with a fixed seed
// whose loss must fall. Plain C++, no BLAS: the figures say whether the VM's
// CPUs and memory work at all, not how fast a tuned library would go.
#pragma once

#include <vector>

#include "pipelines/smoke/check.h"

namespace kiln::smoke {

Check memory_bandwidth_check(size_t bytes);   // "mem_bandwidth_gbps"
Check cpu_gemm_check(int n);                  // "cpu_gemm_gflops"

struct TrainingFigures {
    double first_loss = 0;
    double last_loss = 0;
    int steps = 0;
};
// Deterministic: the same seed gives the same losses on every machine.
TrainingFigures train_tiny_mlp(unsigned seed, int steps);
Check cpu_training_check(unsigned seed, int steps);  // "loss_drop_fraction"

}  // namespace kiln::smoke
