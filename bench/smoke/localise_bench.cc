// bench/smoke (localisation): how long fault_search takes to name the one bad
// member of a ring of 4, 8, 16 and 32 ranks, on the CPU path's real TCP ring
// over loopback (loopback_ring.h: the bad member corrupts what it sends).
// The baseline, measured in the same run, is one all-reduce of the whole
// ring: localisation time is reported as a multiple of it, and the number of
// ring runs against log2(n). The bad member sits at each of 4 positions
// spread over the ring (first, a quarter, the middle, last); figures are the
// mean over them. Writes JSON (--out).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "pipelines/smoke/fault_search.h"
#include "pipelines/smoke/loopback_ring.h"

using namespace kiln::smoke;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln-bench-smoke-localise: fault localisation on loopback TCP rings"};
    std::string out = "bench/results/smoke-localise.json";
    size_t bytes = 1u << 20;
    int port_base = 31000;
    app.add_option("--out", out, "where to write the figures")->capture_default_str();
    app.add_option("--bytes", bytes, "bytes per all-reduce")->capture_default_str();
    app.add_option("--port-base", port_base, "first loopback port (each ring takes fresh ones)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    std::atomic<int> ports{port_base};
    nlohmann::json rings = nlohmann::json::array();
    for (int n : {4, 8, 16, 32}) {
        std::vector<std::string> members;
        for (int i = 0; i < n; ++i) members.push_back("rank-" + std::to_string(i));
        LoopbackRingOptions healthy;
        healthy.bytes = bytes;
        healthy.next_port = &ports;
        // Baseline: the healthy whole ring, best of 3.
        double ring_s = 1e30;
        for (int k = 0; k < 3; ++k) {
            auto t0 = Clock::now();
            auto r = run_loopback_ring(members, healthy);
            if (!r.pass) {
                std::fprintf(stderr, "healthy ring of %d failed: %s\n", n, r.detail.c_str());
                return 1;
            }
            ring_s = std::min(ring_s, seconds_since(t0));
        }
        double total_s = 0, total_runs = 0;
        int max_runs = 0;
        bool all_named = true;
        const std::vector<int> positions = {0, n / 4, n / 2, n - 1};
        for (int bad : positions) {
            LoopbackRingOptions o = healthy;
            o.corrupt = {members[bad]};
            int runs = 0;
            auto t0 = Clock::now();
            auto r = localise(members, [&](const std::vector<std::string>& m) {
                ++runs;
                return run_loopback_ring(m, o);
            });
            total_s += seconds_since(t0);
            total_runs += runs;
            max_runs = std::max(max_runs, runs);
            all_named = all_named && r.complete && r.suspects == std::vector<std::string>{members[bad]};
        }
        const double mean_s = total_s / positions.size(), mean_runs = total_runs / positions.size();
        rings.push_back({{"ranks", n},
                         {"one_ring_run_s", ring_s},
                         {"localisation_s_mean", mean_s},
                         {"localisation_runs_mean", mean_runs},
                         {"localisation_runs_max", max_runs},
                         {"log2_n", std::log2(n)},
                         {"runs_over_log2_n", mean_runs / std::log2(n)},
                         {"time_over_one_ring_run", mean_s / ring_s},
                         {"bad_member_named_alone_every_time", all_named}});
        std::printf("ring of %2d: one run %.4f s; localisation %.4f s (%.1fx), %.2f runs (max %d), %.2f x log2(n)%s\n",
                    n, ring_s, mean_s, mean_s / ring_s, mean_runs, max_runs, mean_runs / std::log2(n),
                    all_named ? "" : "  NOT NAMED");
    }
    nlohmann::json doc = {
        {"area", "smoke-localise"},
        {"what", "fault_search on loopback TCP rings (CPU path), one corrupting member at 4 positions"},
        {"baseline", {{"name", "one all-reduce of the whole healthy ring"}, {"unit", "s"}}},
        {"bytes_per_allreduce", bytes},
        {"rings", rings}};
    std::ofstream(out) << doc.dump(2) << "\n";
    return 0;
}
