// The CPU path's local checks: memory bandwidth (a STREAM-style copy), the
// GFLOP/s of a small float32 GEMM, and a tiny MLP trained with a fixed seed
// whose loss must fall. Plain C++, no BLAS: the figures say whether the VM's
// CPUs and memory work at all, not how fast a tuned library would go.
#pragma once

#include <string>
#include <vector>

#include "pipelines/smoke/check.h"

namespace kiln::smoke {

// How long a speed figure is measured. One short timing on a busy host (or a
// TCG guest whose vCPU the host takes away now and then) says more about the
// neighbours than about the guest: the same work is repeated until
// `min_seconds` of it have run and at least `min_reps` times, and the best
// repetition is the figure (the one least disturbed by others).
struct Repeat {
    double min_seconds = 3.0;
    int min_reps = 3;
    int max_reps = 10000;
};

// What a repeated measurement did, for the check's detail.
struct RepeatStats {
    int reps = 0;
    double total_seconds = 0;
    double best_seconds = 0;
};

// Runs `one_rep` (which does the work once and returns the seconds it took)
// as `r` says.
template <class F>
RepeatStats repeat_best(const Repeat& r, F&& one_rep) {
    RepeatStats s;
    while (s.reps < r.max_reps && (s.reps < r.min_reps || s.total_seconds < r.min_seconds)) {
        const double secs = one_rep();
        s.total_seconds += secs;
        if (s.reps == 0 || secs < s.best_seconds) s.best_seconds = secs;
        ++s.reps;
    }
    return s;
}

// "<reps> reps in <total> s, best <best> s"
std::string describe(const RepeatStats& s);

Check memory_bandwidth_check(size_t bytes, const Repeat& r = {});  // "mem_bandwidth_gbps"
// `slowdown` is a test hook: each timed repetition does the whole product
// that many times while counting the work of one, as a guest that much slower
// would measure (tests prove a slow guest fails its floor). 1 in production.
Check cpu_gemm_check(int n, const Repeat& r = {}, int slowdown = 1);  // "cpu_gemm_gflops"

struct TrainingFigures {
    double first_loss = 0;
    double last_loss = 0;
    int steps = 0;
};
// Deterministic: the same seed gives the same losses on every machine.
TrainingFigures train_tiny_mlp(unsigned seed, int steps);
Check cpu_training_check(unsigned seed, int steps);  // "loss_drop_fraction"

}  // namespace kiln::smoke
