#include "pipelines/smoke/cpu_checks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace kiln::smoke {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// xorshift64*: a generator whose output is the same under every standard
// library (std::uniform_real_distribution is not).
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    double uniform() {  // [-1, 1)
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return static_cast<double>((s * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    }
};
}  // namespace

std::string describe(const RepeatStats& s) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%d reps in %.2f s, best %.3f s", s.reps, s.total_seconds, s.best_seconds);
    return buf;
}

Check memory_bandwidth_check(size_t bytes, const Repeat& r) {
    Check c{"mem_bandwidth_gbps", 0, std::nullopt, "GB/s", ">="};
    std::vector<char> a(bytes, 1), b(bytes, 0);
    size_t rep = 0;
    auto stats = repeat_best(r, [&] {
        auto t0 = Clock::now();
        std::memcpy(b.data(), a.data(), bytes);
        const double secs = seconds_since(t0);
        a[rep % bytes] = b[bytes - 1 - rep % bytes];  // keep the copy observable
        ++rep;
        return secs;
    });
    c.figure = stats.best_seconds > 0 ? 2.0 * static_cast<double>(bytes) / stats.best_seconds / 1e9 : 0;
    c.verdict = stats.best_seconds > 0 ? Verdict::Pass : Verdict::Fail;
    c.detail =
        "memcpy of " + std::to_string(bytes >> 20) + " MiB (read+write bytes, as STREAM counts): " + describe(stats);
    return c;
}

Check cpu_gemm_check(int n, const Repeat& r, int slowdown) {
    Check c{"cpu_gemm_gflops", 0, std::nullopt, "GFLOP/s", ">="};
    const size_t N = static_cast<size_t>(n);
    std::vector<float> A(N * N), B(N * N), C(N * N);
    Rng rng(7);
    for (auto& x : A) x = static_cast<float>(rng.uniform());
    for (auto& x : B) x = static_cast<float>(rng.uniform());
    const double flop = 2.0 * static_cast<double>(N * N * N);
    auto stats = repeat_best(r, [&] {
        auto t0 = Clock::now();
        for (int pass = 0; pass < std::max(1, slowdown); ++pass) {
            std::fill(C.begin(), C.end(), 0.0f);
            for (size_t i = 0; i < N; ++i)
                for (size_t k = 0; k < N; ++k) {
                    const float a = A[i * N + k];
                    const float* brow = &B[k * N];
                    float* crow = &C[i * N];
                    for (size_t j = 0; j < N; ++j) crow[j] += a * brow[j];
                }
        }
        return seconds_since(t0);
    });
    char work[160];
    std::snprintf(work, sizeof work, "%dx%dx%d float32, %.1f Mflop a rep: ", n, n, n, flop / 1e6);
    c.figure = stats.best_seconds > 0 ? flop / stats.best_seconds / 1e9 : 0;
    c.detail = work + describe(stats);
    if (slowdown > 1) c.detail += " (test hook: each rep did the work " + std::to_string(slowdown) + " times)";
    // A wrong product would make the figure meaningless: spot-check cells
    // (N is at least 1: smoke_main refuses smaller sizes).
    const size_t row = std::min<size_t>(3, N - 1), col = std::min<size_t>(5, N - 1);
    double ref = 0;
    for (size_t k = 0; k < N; ++k) ref += static_cast<double>(A[row * N + k]) * B[k * N + col];
    if (stats.best_seconds <= 0 || std::fabs(ref - C[row * N + col]) > 1e-2 * (1 + std::fabs(ref))) {
        c.verdict = Verdict::Fail;
        c.detail = "GEMM result is wrong: " + c.detail;
    } else {
        c.verdict = Verdict::Pass;
    }
    return c;
}

TrainingFigures train_tiny_mlp(unsigned seed, int steps) {
    // y = sin(x . w*) from 8 inputs, a 8-32-1 tanh MLP, full-batch SGD.
    constexpr std::size_t In = 8, Hid = 32, Samples = 256;
    Rng rng(seed);
    std::vector<double> X(Samples * In), Y(Samples), wstar(In);
    for (auto& w : wstar) w = rng.uniform();
    for (std::size_t s = 0; s < Samples; ++s) {
        double dot = 0;
        for (std::size_t i = 0; i < In; ++i) dot += (X[s * In + i] = rng.uniform()) * wstar[i];
        Y[s] = std::sin(dot);
    }
    std::vector<double> W1(Hid * In), b1(Hid, 0), W2(Hid), h(Hid);
    for (auto& w : W1) w = rng.uniform() * 0.5;
    for (auto& w : W2) w = rng.uniform() * 0.5;
    double b2 = 0;
    const double lr = 0.1;
    TrainingFigures f;
    f.steps = steps;
    for (int step = 0; step < steps; ++step) {
        std::vector<double> gW1(W1.size(), 0), gb1(Hid, 0), gW2(Hid, 0);
        double gb2 = 0, loss = 0;
        for (std::size_t s = 0; s < Samples; ++s) {
            const double* x = &X[s * In];
            double out = b2;
            for (std::size_t j = 0; j < Hid; ++j) {
                double a = b1[j];
                for (std::size_t i = 0; i < In; ++i) a += W1[j * In + i] * x[i];
                h[j] = std::tanh(a);
                out += W2[j] * h[j];
            }
            const double d = out - Y[s];
            loss += d * d;
            const double g = 2 * d / Samples;
            gb2 += g;
            for (std::size_t j = 0; j < Hid; ++j) {
                gW2[j] += g * h[j];
                const double gh = g * W2[j] * (1 - h[j] * h[j]);
                gb1[j] += gh;
                for (std::size_t i = 0; i < In; ++i) gW1[j * In + i] += gh * x[i];
            }
        }
        loss /= Samples;
        if (step == 0) f.first_loss = loss;
        f.last_loss = loss;
        for (std::size_t k = 0; k < W1.size(); ++k) W1[k] -= lr * gW1[k];
        for (std::size_t k = 0; k < Hid; ++k) {
            b1[k] -= lr * gb1[k];
            W2[k] -= lr * gW2[k];
        }
        b2 -= lr * gb2;
    }
    return f;
}

Check cpu_training_check(unsigned seed, int steps) {
    Check c{"loss_drop_fraction", 0, std::nullopt, "fraction", ">="};
    auto f = train_tiny_mlp(seed, steps);
    c.figure = f.first_loss > 0 ? 1.0 - f.last_loss / f.first_loss : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "8-32-1 tanh MLP, seed %u, %d steps: loss %.5f -> %.5f", seed, f.steps, f.first_loss,
                  f.last_loss);
    c.detail = buf;
    c.verdict = std::isfinite(f.last_loss) ? Verdict::Pass : Verdict::Fail;
    return c;
}

}  // namespace kiln::smoke
