// Crash safety: `kiln apply` killed with SIGKILL at many points (before and
// after an action's side effect, so also between the effect and its
// journal row) and re-run must end with every action done exactly once.
// And killed while nodes are parked waiting for work they started (issue
// 20): the re-run waits for it again and never starts it twice.
#include <catch2/catch.hpp>

#include <signal.h>

#include <random>
#include <thread>

#include "tests/support/child.h"
#include "tests/support/cli_fleet.h"
#include "tests/support/test_stages.h"

using kiln::test::run_child;
using kiln::test::TempDir;
using namespace std::chrono_literals;
using kiln::test::LedgerStage;

TEST_CASE("crash: SIGKILL at 20+ points, re-run finishes, every action exactly once", "[crash]") {
    TempDir dir;
    // 48 actions: at most about two done per killed run, so 20+ kills come
    // before the work runs out (with 32 a run could end at 19).
    const int nodes = 4, stages = 4, actions = 3;
    auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const std::string ledger = dir.file("ledger");
    std::mt19937 rng(20261202);
    std::uniform_int_distribution<int> point(1, 2);
    std::bernoulli_distribution after(0.5);

    int kills = 0, clean_exits = 0;
    for (int attempt = 0; attempt < 150 && clean_exits == 0; ++attempt) {
        const int at = point(rng);
        const bool phase_after = after(rng);
        auto r =
            run_child({KILN_TEST_DRIVER, "apply", fleet}, {{"KILN_TEST_LEDGER", ledger},
                                                           {"KILN_TEST_ACTIONS", std::to_string(actions)},
                                                           {"KILN_TEST_KILL_AT", std::to_string(at)},
                                                           {"KILN_TEST_KILL_PHASE", phase_after ? "after" : "before"}});
        if (r.signal == SIGKILL) {
            ++kills;
        } else {
            INFO(r.out << r.err);
            REQUIRE(r.exit_code == 0);
            ++clean_exits;
        }
        // Whatever happened, nothing was ever done twice.
        for (const auto& [line, count] : kiln::test::LedgerStage::read_ledger(ledger)) {
            INFO(line);
            REQUIRE(count == 1);
        }
    }
    REQUIRE(kills >= 20);

    auto final_run = run_child({KILN_TEST_DRIVER, "apply", fleet},
                               {{"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_ACTIONS", std::to_string(actions)}});
    INFO(final_run.out << final_run.err);
    REQUIRE(final_run.exit_code == 0);
    auto done = kiln::test::LedgerStage::read_ledger(ledger);
    REQUIRE(done.size() == static_cast<size_t>(nodes * stages * actions));
    for (const auto& [line, count] : done) REQUIRE(count == 1);

    auto plan = run_child({KILN_TEST_DRIVER, "plan", fleet, "--detailed-exitcode"},
                          {{"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_ACTIONS", std::to_string(actions)}});
    INFO(plan.out << plan.err);
    REQUIRE(plan.exit_code == 0);

    auto status = run_child({KILN_TEST_DRIVER, "status", fleet, "--json"}, {{"KILN_TEST_LEDGER", ledger}});
    auto j = nlohmann::json::parse(status.out);
    REQUIRE(j["nodes"].size() == static_cast<size_t>(nodes));
    for (const auto& n : j["nodes"]) REQUIRE(n["state"] == "ready");
}

TEST_CASE("crash: SIGKILL during parked waits, re-run waits again and starts no task twice", "[crash][parking]") {
    TempDir dir;
    const int nodes = 24;
    dir.write("pipelines/park-node.toml", "schema = 1\nname = \"park-node\"\nstages = [\"t-park\"]\n");
    std::string toml =
        "schema = 1\n\n[fleet]\nname = \"parktest\"\npipelines = \"pipelines\"\n\n[limits]\n"
        "parallel = 6\n\n[[racks]]\nname = \"r1\"\n";
    for (int i = 1; i <= nodes; ++i)
        toml +=
            "\n[[nodes]]\nname = \"p" + std::to_string(i) +
            "\"\nrack = \"r1\"\nrole = \"park-node\"\nbmc = { url = \"https://127.0.0.1:" + std::to_string(9100 + i) +
            "\", username = \"root\", password = \"env:KILN_TEST_BMC_PASSWORD\" }\n";
    const std::string fleet = dir.write("fleet.toml", toml);
    const std::string ledger = dir.file("ledger");

    // Tasks started and tasks seen done so far; nothing ever happens twice.
    auto counts = [&] {
        std::pair<int, int> n{0, 0};
        for (const auto& [line, count] : LedgerStage::read_ledger(ledger)) {
            INFO(line);
            REQUIRE(count == 1);
            const bool start = line.size() > 6 && line.compare(line.size() - 6, 6, " start") == 0;
            ++(start ? n.first : n.second);
        }
        return n;
    };
    // Each run (6 nodes in flight, each task 300 ms) is killed as soon as it
    // has started a task of its own that is not done: while nodes wait
    // parked. The next run finds those tasks started and waits for them.
    int kills = 0;
    for (int round = 0; round < 30; ++round) {
        const auto [starts_before, dones_before] = counts();
        if (dones_before == nodes) break;
        kiln::test::RunningChild child({KILN_TEST_DRIVER, "apply", fleet},
                                       {{"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_PARK_MS", "300"}},
                                       dir.file("run" + std::to_string(round)));
        bool waiting = false;
        for (int i = 0; i < 6000 && !waiting && !child.ended(); ++i) {
            const auto [starts, dones] = counts();
            waiting = starts > starts_before && starts > dones;
            if (!waiting) std::this_thread::sleep_for(2ms);
        }
        if (!waiting) {
            auto r = child.wait(60);
            INFO(r.out << r.err);
            REQUIRE(r.exit_code == 0);
            continue;
        }
        REQUIRE(child.signal(SIGKILL));
        auto r = child.wait(30);
        REQUIRE(r.signal == SIGKILL);
        ++kills;
    }
    REQUIRE(kills >= 3);
    auto final_run =
        run_child({KILN_TEST_DRIVER, "apply", fleet}, {{"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_PARK_MS", "20"}});
    INFO(final_run.out << final_run.err);
    REQUIRE(final_run.exit_code == 0);
    REQUIRE(counts() == std::pair<int, int>{nodes, nodes});
}
