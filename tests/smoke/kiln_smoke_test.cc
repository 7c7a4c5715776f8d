// kiln-smoke's CPU path, run as the program it is: the document, the
// verdicts against thresholds, the ring all-reduce across 2 and 3 ranks, and
// a peer that never shows up.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/smoke/smoke_test_util.h"

using kiln::test::find_check;
using kiln::test::free_port_range;
using kiln::test::quick_args;
using kiln::test::run_child;
using kiln::test::run_ranks;
using nlohmann::json;

namespace {
json parse(const kiln::test::ChildResult& r) {
    INFO("stderr: " << r.err);
    auto j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    return j;
}
std::vector<std::string> one_rank(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {KILN_SMOKE_BINARY};
    for (const auto& a : quick_args()) argv.push_back(a);
    for (const auto& a : extra) argv.push_back(a);
    return argv;
}
}  // namespace

TEST_CASE("kiln-smoke prints one document with every CPU check positive figures and a pass") {
    auto r = run_child(one_rank());
    REQUIRE(r.exit_code == 0);
    auto doc = parse(r);
    CHECK(doc["backend"] == "cpu");
    CHECK(doc["verdict"] == "pass");
    CHECK_FALSE(doc["host"].get<std::string>().empty());
    for (const char* name : {"mem_bandwidth_gbps", "cpu_gemm_gflops", "loss_drop_fraction"}) {
        INFO(name);
        const json* c = find_check(doc, name);
        REQUIRE(c);
        CHECK((*c)["verdict"] == "pass");
        CHECK((*c)["figure"].get<double>() > 0);
        CHECK((*c)["threshold"].is_number());
        CHECK_FALSE((*c)["unit"].get<std::string>().empty());
    }
    // One rank: the all-reduce checks are there, skipped with the reason.
    const json* ar = find_check(doc, "allreduce_busbw_gbps");
    REQUIRE(ar);
    CHECK((*ar)["verdict"] == "skip");
    CHECK((*ar)["detail"].get<std::string>().find("one rank") != std::string::npos);
}

TEST_CASE("an impossibly high threshold fails that check and the run") {
    auto r = run_child(one_rank({"--threshold", "cpu_gemm_gflops=1e15"}));
    CHECK(r.exit_code == 1);
    auto doc = parse(r);
    CHECK(doc["verdict"] == "fail");
    const json* c = find_check(doc, "cpu_gemm_gflops");
    REQUIRE(c);
    CHECK((*c)["verdict"] == "fail");
    CHECK((*c)["threshold"].get<double>() == 1e15);
    // The others still pass: one bad figure does not hide the rest.
    CHECK((*find_check(doc, "loss_drop_fraction"))["verdict"] == "pass");
}

TEST_CASE("a --config file sets thresholds and a ceiling fails when exceeded") {
    auto dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    auto path = dir + "/kiln-smoke-config-" + std::to_string(getpid()) + ".json";
    { std::ofstream(path) << R"({"profile": "cpu", "thresholds": {"loss_drop_fraction": 1.5}})"; }
    auto r = run_child(one_rank({"--config", path}));
    std::remove(path.c_str());
    auto doc = parse(r);
    CHECK((*find_check(doc, "loss_drop_fraction"))["verdict"] == "fail");
    CHECK(r.exit_code == 1);
}

TEST_CASE("a VM given GPUs that kiln-smoke cannot use fails gpu_count, from the flag or the vm stage's config") {
    auto r = run_child(one_rank({"--expect-gpus", "2"}));
    CHECK(r.exit_code == 1);
    auto doc = parse(r);
    CHECK(doc["verdict"] == "fail");
    const json* c = find_check(doc, "gpu_count");
    REQUIRE(c);
    CHECK((*c)["verdict"] == "fail");
    CHECK((*c)["figure"] == 0);
    CHECK((*c)["threshold"] == 2);

    char path[] = "/tmp/kiln-smoke-vm-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    std::ofstream(path) << R"({"node": "a", "gpus": 1})";
    auto from_file = parse(run_child(one_rank({"--vm-config", path})));
    const json* f = find_check(from_file, "gpu_count");
    REQUIRE(f);
    CHECK((*f)["verdict"] == "fail");
    // A CPU-only VM ("gpus": 0) has no gpu_count check to fail.
    std::ofstream(path) << R"({"node": "a", "gpus": 0})";
    auto cpu = parse(run_child(one_rank({"--vm-config", path})));
    CHECK(find_check(cpu, "gpu_count") == nullptr);
    CHECK(cpu["verdict"] == "pass");
    std::remove(path);
    // An explicit config that is not there is bad usage.
    CHECK(run_child(one_rank({"--vm-config", "/nonexistent/smoke.json"})).exit_code == 2);
}

TEST_CASE("bad usage exits 2 with a message and no document") {
    auto r = run_child({KILN_SMOKE_BINARY, "--threshold", "nonsense"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("NAME=VALUE") != std::string::npos);
    auto r2 = run_child({KILN_SMOKE_BINARY, "--rank", "3", "--peers", "127.0.0.1:1,127.0.0.1:2"});
    CHECK(r2.exit_code == 2);
}

TEST_CASE("ring all-reduce across 2 and 3 ranks sums known vectors exactly") {
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        int base = free_port_range(n);
        REQUIRE(base > 0);
        auto results = run_ranks(KILN_SMOKE_BINARY, n, base);
        for (int r = 0; r < n; ++r) {
            INFO("rank " << r);
            auto doc = parse(results[static_cast<size_t>(r)]);
            CHECK(doc["ranks"] == n);
            CHECK(doc["rank"] == r);
            const json* errors = find_check(doc, "allreduce_errors");
            const json* busbw = find_check(doc, "allreduce_busbw_gbps");
            REQUIRE(errors);
            REQUIRE(busbw);
            CHECK((*errors)["verdict"] == "pass");
            CHECK((*errors)["figure"].get<double>() == 0);
            CHECK((*busbw)["verdict"] == "pass");
            CHECK((*busbw)["figure"].get<double>() > 0);
            CHECK(results[static_cast<size_t>(r)].exit_code == 0);
        }
    }
}

TEST_CASE("a peer that never connects becomes a failed check within the bound") {
    int base = free_port_range(2);
    REQUIRE(base > 0);
    // Rank 1 never starts: rank 0 gives up after its connect timeout.
    auto r = run_child(one_rank({"--rank", "0", "--peers", kiln::test::peers_list(base, 2), "--connect-timeout", "1"}));
    CHECK(r.exit_code == 1);
    auto doc = parse(r);
    CHECK(doc["verdict"] == "fail");
    for (const char* name : {"allreduce_errors", "allreduce_busbw_gbps"}) {
        const json* c = find_check(doc, name);
        REQUIRE(c);
        CHECK((*c)["verdict"] == "fail");
        CHECK((*c)["detail"].get<std::string>().find("unreachable") != std::string::npos);
    }
    // Local checks still ran and passed.
    CHECK((*find_check(doc, "loss_drop_fraction"))["verdict"] == "pass");
}
