#include "pipelines/smoke/loopback_ring.h"

#include <algorithm>
#include <thread>

#include "pipelines/smoke/ring_allreduce.h"
#include "pipelines/smoke/tcp_ring.h"

namespace kiln::smoke {

RingOutcome run_loopback_ring(const std::vector<std::string>& members, const LoopbackRingOptions& o) {
    const int n = static_cast<int>(members.size());
    const int base = o.next_port ? o.next_port->fetch_add(n) : 0;
    std::vector<Endpoint> peers;
    for (int r = 0; r < n; ++r) peers.push_back({"127.0.0.1", base + r});
    const size_t count = std::max<size_t>(o.bytes / sizeof(float), static_cast<size_t>(n));
    const auto deadline = std::chrono::steady_clock::now() + o.timeout;
    std::vector<size_t> wrong(n, 0);
    std::vector<double> busbw(n, 0);
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            auto ring = TcpRing::connect(r, peers, "127.0.0.1", 0, deadline, &errors[r]);
            if (!ring) return;
            std::vector<float> v(count);
            for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((r + 1) * static_cast<int>(i % 97 + 1));
            if (o.corrupt.count(members[r]))
                for (size_t i = 0; i < count; i += 64) v[i] += 1;
            const auto t0 = std::chrono::steady_clock::now();
            if (!ring_allreduce(*ring, v, deadline, &errors[r])) return;
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            busbw[r] = count * sizeof(float) / secs / 1e9 * allreduce_bus_factor(n);
            const int ranks_total = n * (n + 1) / 2;  // 1 + 2 + ... + n: each rank adds its number
            const float rank_sum = static_cast<float>(ranks_total);
            for (size_t i = 0; i < count; ++i)
                if (v[i] != rank_sum * static_cast<float>(i % 97 + 1)) ++wrong[r];
        });
    for (auto& t : threads) t.join();
    RingOutcome out;
    out.figure = *std::min_element(busbw.begin(), busbw.end());
    for (int r = 0; r < n; ++r) {
        if (!errors[r].empty()) {
            out.detail = members[r] + ": " + errors[r];
            return out;
        }
        if (wrong[r]) {
            out.detail = "allreduce_errors " + std::to_string(wrong[r]) + " > 0";
            return out;
        }
    }
    out.pass = true;
    return out;
}

}  // namespace kiln::smoke
