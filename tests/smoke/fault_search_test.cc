// Fault localisation (fault_search.h) with an injected fault model: a ring
// fails when it holds a bad member. The search must name exactly the bad
// members, clear the rest, record every run, and stay within its budget.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>

#include "pipelines/smoke/fault_search.h"
#include "pipelines/smoke/loopback_ring.h"
#include "tests/smoke/smoke_test_util.h"

using namespace kiln::smoke;

namespace {

std::vector<std::string> ring_of(int n) {
    std::vector<std::string> r;
    for (int i = 0; i < n; ++i) r.push_back("node-" + std::to_string(i));
    return r;
}

// A ring fails when it holds one of `bad` (a dropping link corrupts the sum).
RunRing faulty(std::set<std::string> bad, int* runs) {
    return [bad, runs](const std::vector<std::string>& members) {
        ++*runs;
        REQUIRE(members.size() >= 2);  // an all-reduce needs two ranks
        RingOutcome o;
        o.pass = std::none_of(members.begin(), members.end(), [&](const auto& m) { return bad.count(m) > 0; });
        o.figure = o.pass ? 10.0 : 3.0;
        if (!o.pass) o.detail = "allreduce_errors 4096 > 0";
        return o;
    };
}

}  // namespace

TEST_CASE("localisation names the one bad member of a ring of 6 and clears the other 5 within budget") {
    for (int bad = 0; bad < 6; ++bad) {
        INFO("bad member node-" << bad);
        int runs = 0;
        SearchBudget budget;
        budget.max_runs = 8;
        auto r = localise(ring_of(6), faulty({"node-" + std::to_string(bad)}, &runs), budget);
        CHECK(r.complete);
        CHECK(r.suspects == std::vector<std::string>{"node-" + std::to_string(bad)});
        CHECK(r.cleared.size() == 5);
        CHECK(static_cast<int>(r.runs.size()) == runs);
        CHECK(runs <= 6);
        // The evidence: a failed ring of the suspect with a cleared member.
        CHECK(r.why.at(r.suspects[0]).find("(cleared) failed") != std::string::npos);
        const auto& last_fail =
            std::find_if(r.runs.rbegin(), r.runs.rend(), [](const SearchRun& s) { return !s.outcome.pass; });
        REQUIRE(last_fail != r.runs.rend());
        CHECK(last_fail->members.size() == 2);
    }
}

TEST_CASE("localisation names both bad members of a ring of 6") {
    for (int a = 0; a < 6; ++a)
        for (int b = a + 1; b < 6; ++b) {
            INFO("bad: node-" << a << ", node-" << b);
            int runs = 0;
            auto r = localise(ring_of(6), faulty({"node-" + std::to_string(a), "node-" + std::to_string(b)}, &runs));
            CHECK(r.complete);
            CHECK(r.suspects == std::vector<std::string>{"node-" + std::to_string(a), "node-" + std::to_string(b)});
            CHECK(r.cleared.size() == 4);
        }
}

TEST_CASE("localisation stays near log2(n) runs for one bad member") {
    for (int n : {4, 8, 16, 32, 64}) {
        int worst = 0;
        for (int bad = 0; bad < n; ++bad) {
            int runs = 0;
            auto r = localise(ring_of(n), faulty({"node-" + std::to_string(bad)}, &runs));
            REQUIRE(r.suspects == std::vector<std::string>{"node-" + std::to_string(bad)});
            worst = std::max(worst, runs);
        }
        INFO("n = " << n << ", worst " << worst << " runs");
        // log2(n) halvings, a run of the other half at most each, one confirmation.
        CHECK(worst <= 2 * static_cast<int>(std::log2(n)) + 1);
    }
}

TEST_CASE("a budget that runs out leaves every member not cleared a suspect, and says so") {
    int runs = 0;
    SearchBudget budget;
    budget.max_runs = 1;
    auto r = localise(ring_of(8), faulty({"node-6"}, &runs), budget);
    CHECK_FALSE(r.complete);
    CHECK(runs == 1);
    // The one run (the first half) passed: those four are cleared, the rest suspects.
    CHECK(r.cleared == std::vector<std::string>{"node-0", "node-1", "node-2", "node-3"});
    CHECK(r.suspects.size() == 4);
    CHECK(r.why.at("node-4") == "not cleared within the localisation budget");

    // A deadline already passed: no run at all, nobody cleared.
    SearchBudget late;
    late.deadline = std::chrono::steady_clock::time_point{};
    runs = 0;
    auto none = localise(ring_of(4), faulty({"node-1"}, &runs), late);
    CHECK(runs == 0);
    CHECK_FALSE(none.complete);
    CHECK(none.suspects.size() == 4);
}

TEST_CASE("a ring where every member is bad cannot be told apart: all are named") {
    int runs = 0;
    auto r = localise(ring_of(3), faulty({"node-0", "node-1", "node-2"}, &runs));
    CHECK(r.suspects.size() == 3);
    CHECK(r.cleared.empty());
    CHECK(r.why.at("node-2").find("none could be tested apart") != std::string::npos);
}

TEST_CASE("localisation over real loopback TCP rings names the member whose data is corrupted") {
    std::atomic<int> ports{kiln::test::free_port_range(64)};
    REQUIRE(ports.load() > 0);
    LoopbackRingOptions o;
    o.bytes = 64 << 10;
    o.corrupt = {"node-4"};
    o.next_port = &ports;
    const auto ring = ring_of(6);
    REQUIRE_FALSE(run_loopback_ring(ring, o).pass);  // the whole ring fails
    std::atomic<int> runs{0};
    auto r = localise(ring, [&](const std::vector<std::string>& members) {
        ++runs;
        return run_loopback_ring(members, o);
    });
    CHECK(r.complete);
    CHECK(r.suspects == std::vector<std::string>{"node-4"});
    CHECK(r.cleared.size() == 5);
    for (const auto& run : r.runs) {
        const bool has_bad = std::find(run.members.begin(), run.members.end(), "node-4") != run.members.end();
        CHECK(run.outcome.pass == !has_bad);
        if (run.outcome.pass) CHECK(run.outcome.figure > 0);
    }
}
