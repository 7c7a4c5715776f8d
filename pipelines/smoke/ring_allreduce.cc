#include "pipelines/smoke/ring_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

namespace kiln::smoke {

bool ring_allreduce(TcpRing& ring, std::vector<float>& data, Deadline deadline, std::string* err,
                    std::chrono::milliseconds step_delay) {
    auto pause = [&] {
        if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
    };
    const int n = ring.size(), r = ring.rank();
    if (n == 1) return true;
    const size_t count = data.size();
    auto begin = [&](int chunk) { return count * static_cast<size_t>(chunk) / static_cast<size_t>(n); };
    auto len = [&](int chunk) { return begin(chunk + 1) - begin(chunk); };
    std::vector<float> incoming(len(0) + 1 + count / static_cast<size_t>(n));
    auto mod = [n](int x) { return ((x % n) + n) % n; };
    // Reduce-scatter: after n-1 steps rank r holds the full sum of chunk r+1.
    for (int s = 0; s < n - 1; ++s) {
        const int send_c = mod(r - s), recv_c = mod(r - s - 1);
        pause();
        if (!ring.exchange(data.data() + begin(send_c), len(send_c) * sizeof(float), incoming.data(),
                           len(recv_c) * sizeof(float), deadline, err))
            return false;
        float* dst = data.data() + begin(recv_c);
        for (size_t i = 0; i < len(recv_c); ++i) dst[i] += incoming[i];
    }
    // All-gather: pass the finished chunks round.
    for (int s = 0; s < n - 1; ++s) {
        const int send_c = mod(r + 1 - s), recv_c = mod(r - s);
        pause();
        if (!ring.exchange(data.data() + begin(send_c), len(send_c) * sizeof(float), data.data() + begin(recv_c),
                           len(recv_c) * sizeof(float), deadline, err))
            return false;
    }
    return true;
}

double allreduce_bus_factor(int ranks) {
    return ranks <= 1 ? 0.0 : 2.0 * (ranks - 1) / ranks;
}

namespace {
// Small integers: every partial sum is exact in float32.
float known_value(int rank, size_t i) {
    return static_cast<float>((rank + 1) * static_cast<int>(i % 97 + 1));
}
}  // namespace

std::vector<Check> allreduce_checks(TcpRing& ring, size_t bytes, int iterations, Deadline deadline,
                                    const RankFault& fault) {
    const int n = ring.size();
    Check correct{"allreduce_errors", 0, std::nullopt, "elements", "<="};
    Check busbw{"allreduce_busbw_gbps", 0, std::nullopt, "GB/s", ">="};
    correct.verdict = busbw.verdict = Verdict::Pass;
    if (n == 1) {
        correct.verdict = busbw.verdict = Verdict::Skip;
        correct.detail = busbw.detail = "one rank: no peers to reduce with";
        return {correct, busbw};
    }
    const size_t count = std::max<size_t>(bytes / sizeof(float), static_cast<size_t>(n));
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = known_value(ring.rank(), i);
    if (fault.corrupt)
        for (size_t i = 0; i < count; i += 64) v[i] += 1;
    if (fault.drop) {
        ring.drop_links();
        correct.verdict = busbw.verdict = Verdict::Fail;
        correct.detail = busbw.detail = "this rank dropped its ring links (test fault)";
        return {correct, busbw};
    }
    std::string err;
    if (!ring_allreduce(ring, v, deadline, &err, fault.step_delay)) {
        correct.verdict = busbw.verdict = Verdict::Fail;
        correct.detail = busbw.detail = "all-reduce failed: " + err;
        return {correct, busbw};
    }
    const int ranks_total = n * (n + 1) / 2;  // 1 + 2 + ... + n: each rank adds its number
    const float rank_sum = static_cast<float>(ranks_total);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
        if (v[i] != rank_sum * static_cast<float>(i % 97 + 1)) ++wrong;
    correct.figure = static_cast<double>(wrong);
    correct.detail = std::to_string(count) + " float32 elements over " + std::to_string(n) + " ranks";

    double best = 0;
    for (int it = 0; it < std::max(1, iterations); ++it) {
        auto t0 = std::chrono::steady_clock::now();
        if (!ring_allreduce(ring, v, deadline, &err, fault.step_delay)) {
            busbw.verdict = Verdict::Fail;
            busbw.detail = "all-reduce failed: " + err;
            return {correct, busbw};
        }
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double algbw = static_cast<double>(count * sizeof(float)) / secs / 1e9;
        best = std::max(best, algbw * allreduce_bus_factor(n));
    }
    busbw.figure = best;
    char buf[128];
    std::snprintf(buf, sizeof buf, "%zu bytes, %d ranks, best of %d (busbw = algbw * 2(n-1)/n)", count * sizeof(float),
                  n, std::max(1, iterations));
    busbw.detail = buf;
    return {correct, busbw};
}

}  // namespace kiln::smoke
