// Helpers for the smoke tests: free loopback ports and running kiln-smoke
// ranks side by side as child processes.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/child.h"

namespace kiln::test {

// The first port the kernel hands out for outgoing connections
// (net.ipv4.ip_local_port_range; Linux's default is 32768).
inline int first_ephemeral_port() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    return in >> low && low > 0 ? low : 32768;
}

// `n` consecutive loopback ports nothing listens on right now, below the
// ephemeral range: a client socket of another test running beside this one
// (HTTP, PostgreSQL) cannot take one of them between this check and the
// ranks' bind, as it could inside that range.
inline int free_port_range(int n) {
    const int low = 10000;
    const int high = first_ephemeral_port() - n;  // the range ends below the ephemeral ports
    const unsigned span = high > low + 1000 ? static_cast<unsigned>(high - low) : 30000u;
    for (int attempt = 0; attempt < 200; ++attempt) {
        int base = low + static_cast<int>((static_cast<unsigned>(getpid()) * 131u + attempt * 977u) % span);
        bool ok = true;
        for (int p = base; p < base + n && ok; ++p) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in sa{};
            sa.sin_family = AF_INET;
            sa.sin_port = htons(static_cast<uint16_t>(p));
            sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
            close(fd);
        }
        if (ok) return base;
    }
    return 0;
}

inline std::string peers_list(int base, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(base + i);
    return s;
}

// Small sizes, and speed floors at zero: the tests check behaviour, not
// how fast a loaded CI machine is (a later --threshold still wins).
inline std::vector<std::string> quick_args() {
    return {"--mem-bytes",       "1048576",
            "--gemm-n",          "48",
            "--min-seconds",     "0.05",
            "--steps",           "60",
            "--allreduce-bytes", "65536",
            "--iterations",      "2",
            "--threshold",       "mem_bandwidth_gbps=0",
            "--threshold",       "cpu_gemm_gflops=0",
            "--threshold",       "allreduce_busbw_gbps=0"};
}

// Runs every rank at once; returns each rank's result.
inline std::vector<ChildResult> run_ranks(const std::string& binary, int n, int base,
                                          const std::vector<std::string>& extra = {}) {
    std::vector<ChildResult> out(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            std::vector<std::string> argv = {binary, "--rank", std::to_string(r), "--peers", peers_list(base, n)};
            for (const auto& a : quick_args()) argv.push_back(a);
            for (const auto& a : extra) argv.push_back(a);
            out[static_cast<size_t>(r)] = run_child(argv);
        });
    for (auto& t : threads) t.join();
    return out;
}

inline const nlohmann::json* find_check(const nlohmann::json& doc, const std::string& name) {
    for (const auto& c : doc["checks"])
        if (c["name"] == name) return &c;
    return nullptr;
}

}  // namespace kiln::test
