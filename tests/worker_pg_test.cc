// Several `kiln worker` processes sharing one fleet through a PostgreSQL
// store (journal/leases.h): each node-stage's side effects happen exactly
// once whoever does them, labels choose who may, a worker killed with
// SIGKILL is taken over, and one stalled past its lease is fenced.
//
// Every wait is on an observable condition (a file, a row, a process
// ending) with a deadline; nothing asserts on elapsed time.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "provisioner/journal/leases.h"
#include "provisioner/journal/pg_store.h"
#include "tests/support/child.h"
#include "tests/support/cli_fleet.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/test_stages.h"
#include "tests/support/wait.h"

using kiln::test::LedgerStage;
using kiln::test::PgCluster;
using kiln::test::PgRaw;
using kiln::test::run_child;
using kiln::test::RunningChild;
using kiln::test::TempDir;
using kiln::test::wait_until;

namespace {

constexpr int kStages = 4;   // alpha, beta, gamma, t-handover (cli_fleet.h)
constexpr int kActions = 2;  // per node-stage

std::vector<std::string> worker_argv(const std::string& url, const std::string& fleet, const std::string& id,
                                     const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {KILN_TEST_DRIVER, "--store", url,      "worker", fleet, "--worker-id", id,
                                     "--lease-ttl",    "2s",      "--poll", "50ms"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

std::map<std::string, std::string> ledger_env(const std::string& ledger, int sleep_ms = 0) {
    return {{"KILN_TEST_LEDGER", ledger},
            {"KILN_TEST_ACTIONS", std::to_string(kActions)},
            {"KILN_TEST_SLEEP_MS", std::to_string(sleep_ms)}};
}

// Every side effect at most once; `complete`: every one of them present.
void require_exactly_once(const std::string& ledger, int nodes) {
    auto done = LedgerStage::read_ledger(ledger);
    for (const auto& [line, count] : done) {
        INFO(line);
        REQUIRE(count == 1);
    }
    REQUIRE(done.size() == static_cast<size_t>(nodes * kStages * kActions));
}

// Until every worker exits 0 (a worker past 300 s fails the test).
void require_all_exit_ok(std::vector<std::unique_ptr<RunningChild>>& workers) {
    for (auto& w : workers) {
        bool timed_out = false;
        auto r = w->wait(300, &timed_out);
        INFO(r.out << r.err);
        REQUIRE_FALSE(timed_out);
        REQUIRE(r.exit_code == 0);
    }
}

// Three workers w1..w3 over the fleet until each exits 0.
void run_three_workers(const std::string& url, const std::string& fleet, const std::map<std::string, std::string>& env,
                       const TempDir& dir) {
    std::vector<std::unique_ptr<RunningChild>> workers;
    for (const char* id : {"w1", "w2", "w3"})
        workers.push_back(std::make_unique<RunningChild>(worker_argv(url, fleet, id), env, dir.file(id)));
    require_all_exit_ok(workers);
}

void require_converged(const std::string& url, const std::string& fleet, const std::string& ledger) {
    auto plan = run_child({KILN_TEST_DRIVER, "--store", url, "plan", fleet, "--detailed-exitcode"}, ledger_env(ledger));
    INFO(plan.out << plan.err);
    REQUIRE(plan.exit_code == 0);
}

// Nodes a worker claimed, from the journal's lease events.
std::set<std::string> claimed_by(PgRaw& raw, const std::string& worker) {
    auto list = raw.text(
        "SELECT coalesce(string_agg(DISTINCT node, ','), '') FROM events WHERE kind = 'lease' AND "
        "message LIKE 'worker " +
        worker + " claimed %'");
    std::set<std::string> out;
    for (size_t i = 0; i < list.size();) {
        auto j = list.find(',', i);
        if (j == std::string::npos) j = list.size();
        out.insert(list.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

// The most nodes out of service at once as the ledger shows it: a node is
// out from its first side effect to its last (a lower bound of the real
// overlap, so a peak above a limit is a real breach).
int peak_out_of_service(const std::string& ledger) {
    std::ifstream in(ledger);
    std::vector<std::string> order;  // node of each line, in write order
    for (std::string line; std::getline(in, line);) order.push_back(line.substr(0, line.find(' ')));
    std::map<std::string, std::pair<size_t, size_t>> span;  // node -> first, last line
    for (size_t i = 0; i < order.size(); ++i) {
        auto [it, fresh] = span.try_emplace(order[i], i, i);
        if (!fresh) it->second.second = i;
    }
    int peak = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        int out = 0;
        for (const auto& [node, s] : span) out += (s.first <= i && i <= s.second) ? 1 : 0;
        peak = std::max(peak, out);
    }
    return peak;
}

}  // namespace

TEST_CASE("workers: three share a fleet, each side effect once, labels respected", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const int nodes = 6;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    // n1, n3, n5 are in rack r2; n2, n4, n6 in r1 (cli_fleet.h).
    std::vector<std::unique_ptr<RunningChild>> workers;
    workers.push_back(std::make_unique<RunningChild>(worker_argv(url, fleet, "wA", {"--label", "rack=r1"}),
                                                     ledger_env(ledger, 20), dir.file("wA")));
    workers.push_back(std::make_unique<RunningChild>(worker_argv(url, fleet, "wB", {"--label", "rack=r2"}),
                                                     ledger_env(ledger, 20), dir.file("wB")));
    workers.push_back(
        std::make_unique<RunningChild>(worker_argv(url, fleet, "wC"), ledger_env(ledger, 20), dir.file("wC")));
    require_all_exit_ok(workers);
    require_exactly_once(ledger, nodes);
    PgRaw raw(url);
    // Each labelled worker claimed only its rack's nodes; wC, serving all,
    // may have taken any. A node another worker finished is not claimed
    // again, so together they claimed every node.
    const auto a = claimed_by(raw, "wA"), b = claimed_by(raw, "wB"), c = claimed_by(raw, "wC");
    const std::set<std::string> r1{"n2", "n4", "n6"}, r2{"n1", "n3", "n5"};
    REQUIRE(std::includes(r1.begin(), r1.end(), a.begin(), a.end()));
    REQUIRE(std::includes(r2.begin(), r2.end(), b.begin(), b.end()));
    std::set<std::string> all = a;
    all.insert(b.begin(), b.end());
    all.insert(c.begin(), c.end());
    REQUIRE(all.size() == static_cast<size_t>(nodes));
    REQUIRE(raw.integer("SELECT count(*) FROM leases WHERE worker <> ''") == 0);  // all given back
    require_converged(url, fleet, ledger);
}

TEST_CASE("workers: SIGKILL of workers at 20+ points, the others finish, each side effect once", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    // 72 side effects; a doomed worker does at most two before it dies, so
    // 24 kills leave work for the survivors.
    const int nodes = 6, actions = 3;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    auto env = ledger_env(ledger, 20);
    env["KILN_TEST_ACTIONS"] = std::to_string(actions);
    auto argv = [&](const std::string& id) {
        auto a = worker_argv(url, fleet, id);
        a[a.size() - 3] = "1s";  // --lease-ttl: a dead worker's nodes come back sooner
        return a;
    };
    std::mt19937 rng(20261205);
    std::uniform_int_distribution<int> point(1, 2);
    std::bernoulli_distribution after(0.5);
    int kills = 0, kills_after = 0;
    std::set<std::pair<size_t, bool>> points;  // (side effects done when killed, after the write)
    // Two doomed workers at a time, each killing itself at its first or
    // second side effect, before or after the write: the other of the pair
    // (and the next pairs) carry on and take the dead one's nodes over.
    for (int pair = 0; pair < 40 && kills < 24; ++pair) {
        std::vector<std::unique_ptr<RunningChild>> doomed;
        std::vector<bool> phase;
        for (int k = 0; k < 2; ++k) {
            auto e = env;
            e["KILN_TEST_KILL_AT"] = std::to_string(point(rng));
            phase.push_back(after(rng));
            e["KILN_TEST_KILL_PHASE"] = phase.back() ? "after" : "before";
            const std::string id = "d" + std::to_string(pair) + "-" + std::to_string(k);
            doomed.push_back(std::make_unique<RunningChild>(argv(id), e, dir.file(id)));
        }
        for (size_t k = 0; k < doomed.size(); ++k) {
            bool timed_out = false;
            auto r = doomed[k]->wait(120, &timed_out);
            INFO(r.out << r.err);
            REQUIRE_FALSE(timed_out);
            if (r.signal == SIGKILL) {
                ++kills;
                kills_after += phase[k] ? 1 : 0;
                points.insert({LedgerStage::read_ledger(ledger).size(), phase[k]});
            } else {
                REQUIRE(r.exit_code == 0);  // no work left for it: never a failure
            }
        }
        for (const auto& [line, count] : LedgerStage::read_ledger(ledger)) {
            INFO(line);
            REQUIRE(count == 1);  // whatever happened, nothing done twice
        }
    }
    INFO(kills << " kills, " << kills_after << " after the write, at " << points.size() << " distinct points");
    REQUIRE(kills >= 20);
    REQUIRE(kills_after > 0);
    REQUIRE(kills_after < kills);
    REQUIRE(points.size() >= 8);

    // The survivors take every dead worker's nodes over and finish.
    RunningChild s1(argv("s1"), env, dir.file("s1"));
    RunningChild s2(argv("s2"), env, dir.file("s2"));
    for (auto* w : {&s1, &s2}) {
        bool timed_out = false;
        auto r = w->wait(300, &timed_out);
        INFO(r.out << r.err);
        REQUIRE_FALSE(timed_out);
        REQUIRE(r.exit_code == 0);
    }
    auto done = LedgerStage::read_ledger(ledger);
    REQUIRE(done.size() == static_cast<size_t>(nodes * kStages * actions));
    for (const auto& [line, count] : done) REQUIRE(count == 1);
    PgRaw raw(url);
    // What each dead worker started and never ended was closed by the one
    // that took the node over, not left dangling or redone.
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE ended_ms = 0") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM leases WHERE worker <> ''") == 0);
    auto plan = run_child({KILN_TEST_DRIVER, "--store", url, "plan", fleet, "--detailed-exitcode"}, env);
    INFO(plan.out << plan.err);
    REQUIRE(plan.exit_code == 0);
}

TEST_CASE("workers: a worker stalled past its lease is fenced and does nothing more", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const int nodes = 2;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    // Slow applies: the stalled worker is caught in the middle of a stage.
    RunningChild stalled(worker_argv(url, fleet, "stalled"), ledger_env(ledger, 400), dir.file("stalled"));
    REQUIRE(wait_until([&] { return !LedgerStage::read_ledger(ledger).empty(); }, 120));
    REQUIRE(stalled.signal(SIGSTOP));

    PgRaw raw(url);
    const int64_t held = raw.integer("SELECT count(*) FROM leases WHERE worker = 'stalled'");
    REQUIRE(held >= 1);
    raw.exec("CREATE TABLE held_before AS SELECT node, generation FROM leases WHERE worker = 'stalled'");

    // Another worker waits out the stalled one's leases, takes the nodes
    // over and finishes them.
    auto taker = run_child(worker_argv(url, fleet, "taker"), ledger_env(ledger));
    INFO(taker.out << taker.err);
    REQUIRE(taker.exit_code == 0);
    require_exactly_once(ledger, nodes);
    REQUIRE(raw.integer("SELECT count(*) FROM held_before b JOIN leases l USING (node) "
                        "WHERE l.generation > b.generation") == held);
    const auto before = LedgerStage::read_ledger(ledger);
    // Runs are numbered in start order: the stalled worker's came first.
    const std::string stalled_run = "(SELECT min(id) FROM runs)";
    const int64_t stalled_actions = raw.integer("SELECT count(*) FROM actions WHERE run_id = " + stalled_run);

    REQUIRE(stalled.signal(SIGCONT));
    bool timed_out = false;
    auto r = stalled.wait(120, &timed_out);
    INFO(r.out << r.err);
    REQUIRE_FALSE(timed_out);
    REQUIRE(r.signal == 0);
    REQUIRE((r.out + r.err).find("lease lost on node") != std::string::npos);
    REQUIRE((r.out + r.err).find("superseded") != std::string::npos);
    // Fenced: not one more side effect, and the journal is the taker's.
    REQUIRE(LedgerStage::read_ledger(ledger) == before);
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE run_id = " + stalled_run) == stalled_actions);
    REQUIRE(raw.integer("SELECT count(*) FROM stage_results WHERE run_id = " + stalled_run +
                        " AND outcome = 'verified' AND ended_ms > (SELECT min(claimed_ms) FROM leases)") == 0);
    // It may claim a node the taker finished and released, but finds it
    // converged; no node's state is set back by the fenced worker.
    REQUIRE(raw.integer("SELECT count(*) FROM node_state WHERE state <> 'ready'") == 0);
    require_converged(url, fleet, ledger);
}

TEST_CASE("worker: bad flags and a journal file are refused before anything runs", "[worker]") {
    TempDir dir;
    const auto fleet = kiln::test::write_cli_fleet(dir, 2);
    const auto ledger = dir.file("ledger");
    auto no_store = run_child({KILN_TEST_DRIVER, "worker", fleet}, ledger_env(ledger));
    REQUIRE(no_store.exit_code == 1);
    REQUIRE(no_store.err.find("PostgreSQL store") != std::string::npos);
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--label", "rack"},
          std::vector<std::string>{"--label", "rack=r1", "--label", "rack=r2"},
          std::vector<std::string>{"--label", "rack=r9"}, std::vector<std::string>{"--lease-ttl", "10ms"},
          std::vector<std::string>{"--poll", "soon"}, std::vector<std::string>{"--store-reconnect", "soon"},
          std::vector<std::string>{"--metrics-listen", "nowhere"}}) {
        std::vector<std::string> argv = {KILN_TEST_DRIVER, "--store", "postgresql:///nowhere?host=/nonexistent",
                                         "worker", fleet};
        argv.insert(argv.end(), bad.begin(), bad.end());
        auto r = run_child(argv, ledger_env(ledger));
        INFO(bad.front() << " " << bad.back() << ": " << r.err);
        REQUIRE(r.exit_code == 1);
        REQUIRE(r.err.find("--") != std::string::npos);  // names the flag
    }
    REQUIRE(LedgerStage::read_ledger(ledger).empty());
    auto help = run_child({KILN_TEST_DRIVER, "worker", "--help"});
    REQUIRE(help.exit_code == 0);
    REQUIRE(help.out.find("lease") != std::string::npos);
    REQUIRE(help.out.find("--label") != std::string::npos);
}

TEST_CASE("leases: claims, takeover after expiry, and fencing of the superseded holder", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    const auto url = cluster->create_database();
    auto a = kiln::journal::open_pg_store(url, {});
    auto b = kiln::journal::open_pg_store(url, {});
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    auto* la = (*a)->leases();
    auto* lb = (*b)->leases();
    REQUIRE(la);
    REQUIRE(lb);
    la->set_worker_id("A");
    lb->set_worker_id("B");
    const auto ttl = std::chrono::seconds(60);
    auto run = (*a)->begin_run({"worker", "f", "h", "v"});
    REQUIRE(run.ok());

    auto first = la->claim("n1", "alpha", ttl);
    REQUIRE(first.ok());
    REQUIRE(std::get<kiln::journal::Lease>(*first).generation == 1);
    REQUIRE(la->check_fresh("n1").ok());
    REQUIRE(lb->check_fresh("n1").error().code == "lease.stale");  // not B's
    auto refused = lb->claim("n1", "alpha", ttl);
    REQUIRE(refused.ok());
    REQUIRE(std::get<kiln::journal::LeaseHolder>(*refused).worker == "A");
    // A starts an action and stalls before ending it.
    auto started = (*a)->begin_action(*run, "n1", "alpha", "a0", "flash");
    REQUIRE(started.ok());

    PgRaw raw(url);
    REQUIRE(raw.exec("UPDATE leases SET lease_until_ms = 0 WHERE node = 'n1'"));  // A's lease ran out
    auto taken = lb->claim("n1", "alpha", ttl);
    REQUIRE(taken.ok());
    REQUIRE(std::get<kiln::journal::Lease>(*taken).generation == 2);
    // A's unfinished action is closed for the stage to re-observe.
    REQUIRE(raw.text("SELECT outcome FROM actions WHERE action_id = 'a0'") == "interrupted");

    // Every write A makes about n1 is refused, naming the loss.
    auto again = (*a)->begin_action(*run, "n1", "alpha", "a1", "flash again");
    REQUIRE_FALSE(again.ok());
    REQUIRE(again.error().code == "lease.lost");
    REQUIRE(again.error().message.find("lease lost on node n1 stage alpha (generation 1 superseded") !=
            std::string::npos);
    REQUIRE((*a)->end_action(*started, "ok", "").error().code == "lease.lost");
    REQUIRE((*a)->set_node_state({"n1", "ready", "", "alpha", "", 0, *run}).error().code == "lease.lost");
    REQUIRE((*a)->record_stage({*run, "n1", "alpha", "h", "verified", "", 1, 1, 1, 2}).error().code == "lease.lost");
    REQUIRE(raw.text("SELECT outcome FROM actions WHERE action_id = 'a0'") == "interrupted");
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE action_id = 'a1'") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM verified") == 0);
    auto lost = la->renew(ttl);
    REQUIRE(lost.ok());
    REQUIRE(*lost == std::vector<std::string>{"n1"});

    // The new holder writes; after it gives the node back, A may claim it
    // again at a newer generation.
    REQUIRE((*b)->begin_action(*run, "n1", "alpha", "a1", "flash").ok());
    REQUIRE(lb->release("n1").ok());
    la->forget("n1");
    auto back = la->claim("n1", "beta", ttl);
    REQUIRE(back.ok());
    REQUIRE(std::get<kiln::journal::Lease>(*back).generation == 3);
    REQUIRE((*a)->set_node_state({"n1", "running", "", "beta", "", 0, *run}).ok());

    // Unconfirmed for half its ttl (no heartbeat here), a lease is not
    // trusted for a side effect, even before anyone takes it over.
    auto brief = la->claim("n2", "alpha", std::chrono::seconds(1));
    REQUIRE(brief.ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past ttl/2 by construction, not a race
    auto stale = la->check_fresh("n2");
    REQUIRE(stale.error().code == "lease.stale");
    REQUIRE(stale.error().message.find("claiming it again") != std::string::npos);
    auto renewed = la->renew(std::chrono::seconds(60));
    REQUIRE(renewed.ok());
    REQUIRE(renewed->empty());
    REQUIRE(la->check_fresh("n2").ok());
}

TEST_CASE("leases: a journal at schema 1 gains the lease table, keeping its rows", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    const auto url = cluster->create_database();
    {
        PgRaw raw(url);
        REQUIRE(raw.exec("CREATE TABLE kiln_schema(version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)"));
        REQUIRE(raw.exec("INSERT INTO kiln_schema VALUES(1, 0)"));
        REQUIRE(
            raw.exec("CREATE TABLE node_state(node TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL, "
                     "stage TEXT NOT NULL, error TEXT NOT NULL, updated_ms BIGINT NOT NULL, run_id BIGINT NOT "
                     "NULL)"));
        REQUIRE(raw.exec("INSERT INTO node_state VALUES('n1', 'ready', '', 'alpha', '', 1, 1)"));
    }
    auto s = kiln::journal::open_pg_store(url, {});
    INFO((s ? std::string() : s.error().str()));
    REQUIRE(s.ok());
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT max(version) FROM kiln_schema") == 6);
    REQUIRE(raw.text("SELECT to_regclass('leases') IS NOT NULL") == "t");
    REQUIRE(raw.text("SELECT state FROM node_state WHERE node = 'n1'") == "ready");
}

TEST_CASE("leases: a journal at schema 4 gains held_from, a held lease's from its generation", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    const auto url = cluster->create_database();
    REQUIRE(kiln::journal::open_pg_store(url, {}).ok());
    {
        // Back to schema 4, with a node held at its seventh claim.
        PgRaw raw(url);
        REQUIRE(raw.exec("ALTER TABLE leases DROP COLUMN held_from"));
        REQUIRE(raw.exec("DROP TABLE records"));
        REQUIRE(raw.exec("DELETE FROM kiln_schema WHERE version >= 5"));
        REQUIRE(
            raw.exec("INSERT INTO leases(node, stage, worker, generation, lease_until_ms, claimed_ms) "
                     "VALUES('n1', 'beta', 'w1', 7, 0, 0)"));
    }
    auto s = kiln::journal::open_pg_store(url, {});
    INFO((s ? std::string() : s.error().str()));
    REQUIRE(s.ok());
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT max(version) FROM kiln_schema") == 6);
    // The earliest generation known to be this holder's: what it verified
    // before it is not counted (observed again), never the other way.
    REQUIRE(raw.integer("SELECT held_from FROM leases WHERE node = 'n1'") == 7);
}

TEST_CASE("workers: parallel and per_rack hold fleet-wide across three workers", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    struct Case {
        std::string limits;
        std::string key;  // the probe's peak that must stay within the limit
        int limit;
    };
    // Each worker alone would run up to `parallel` at once: three would
    // reach three times that without the database's slots.
    for (const auto& c : {Case{"parallel = 2", "total", 2}, Case{"parallel = 4\nper_rack = 1", "rack:r1", 1}}) {
        INFO(c.limits);
        TempDir dir;
        const int nodes = 6;
        const auto fleet = kiln::test::write_cli_fleet(dir, nodes, c.limits);
        const auto ledger = dir.file("ledger");
        const auto probe = dir.file("probe");
        const auto url = cluster->create_database();
        auto env = ledger_env(ledger, 30);
        env["KILN_TEST_PROBE"] = probe;
        run_three_workers(url, fleet, env, dir);
        require_exactly_once(ledger, nodes);
        auto peaks = LedgerStage::read_probe_peaks(probe);
        INFO("peak total " << peaks["total"] << ", rack r1 " << peaks["rack:r1"] << ", rack r2 " << peaks["rack:r2"]);
        REQUIRE(peaks["total"] >= 1);
        REQUIRE(peaks[c.key] <= c.limit);
        if (c.key != "total") REQUIRE(peaks["rack:r2"] <= c.limit);
        PgRaw raw(url);
        REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE worker <> ''") == 0);  // all given back
    }
}

TEST_CASE("workers: PostgreSQL restarted twice mid-run, they reconnect and finish, each side effect once",
          "[worker][pg]") {
    std::string why;
    auto cluster = PgCluster::start(&why);  // its own: this test restarts the server
    if (!cluster) {
        kiln::test::report_skipped(why);
        return;
    }
    TempDir dir;
    const int nodes = 6;
    const int total = nodes * kStages * kActions;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    std::vector<std::unique_ptr<RunningChild>> workers;
    for (const char* id : {"w1", "w2", "w3"})
        workers.push_back(
            std::make_unique<RunningChild>(worker_argv(url, fleet, id), ledger_env(ledger, 40), dir.file(id)));
    // This case is about running workers: all three are past their open
    // (registered) before the server goes away. A worker that meets the
    // restart while it opens is the journal test's case.
    PgRaw up(url);
    REQUIRE(wait_until([&] { return up.text("SELECT count(*) FROM workers") == "3"; }, 120));  // "": no table yet
    // Restart once a quarter of the work is done, and again at half.
    for (const int fraction : {4, 2}) {
        REQUIRE(wait_until([&] { return LedgerStage::read_ledger(ledger).size() >= size_t(total / fraction); }, 120));
        const size_t before = LedgerStage::read_ledger(ledger).size();
        INFO("restart at " << before << " of " << total << " side effects");
        REQUIRE(before < size_t(total));
        // Every worker lives through the restart; one that did not says why.
        for (auto& w : workers) {
            if (!w->ended()) continue;
            auto r = w->wait(1);
            FAIL("a worker ended before the restart, exit " << r.exit_code << ":\n" << r.out << r.err);
        }
        REQUIRE(cluster->restart());
    }
    require_all_exit_ok(workers);
    require_exactly_once(ledger, nodes);
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE ended_ms = 0") == 0);  // none left open
    REQUIRE(raw.integer("SELECT count(*) FROM leases WHERE worker <> ''") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE worker <> ''") == 0);
    // Each node-stage verified once: no stage result doubled by a re-sent write.
    REQUIRE(raw.integer("SELECT count(*) FROM (SELECT node, stage FROM stage_results WHERE outcome = 'verified' "
                        "GROUP BY node, stage HAVING count(*) > 1) d") == 0);
    REQUIRE(raw.integer("SELECT count(DISTINCT (node, stage)) FROM stage_results WHERE outcome = 'verified'") ==
            int64_t{nodes} * kStages);
    require_converged(url, fleet, ledger);
}

TEST_CASE("workers: PostgreSQL down past --store-reconnect, they stop with a named error and lose nothing",
          "[worker][pg]") {
    std::string why;
    auto cluster = PgCluster::start(&why);  // its own: this test stops the server
    if (!cluster) {
        kiln::test::report_skipped(why);
        return;
    }
    TempDir dir;
    const int nodes = 4;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    auto give_up_soon = [&](const char* id) {
        auto argv = worker_argv(url, fleet, id);
        argv.insert(argv.begin() + 1, {"--store-reconnect", "200ms"});
        return argv;
    };
    // Both wait at gamma's gate until the server is down: neither can
    // finish first, however slowly the other one starts.
    const auto gate = dir.file("gate");
    auto env = ledger_env(ledger, 40);
    env["KILN_TEST_GATE"] = gate;
    env["KILN_TEST_GATE_STAGE"] = "gamma";
    RunningChild w1(give_up_soon("w1"), env, dir.file("w1"));
    RunningChild w2(give_up_soon("w2"), env, dir.file("w2"));
    REQUIRE(wait_until([&] { return LedgerStage::read_ledger(ledger).size() >= 4; }, 120));
    {
        // Both workers past opening the store (a sanitizer build starts
        // slowly): what is tested is the server going away mid-run.
        PgRaw up(url);
        REQUIRE(wait_until([&] { return up.integer("SELECT count(*) FROM workers") >= 2; }, 120));
    }
    REQUIRE(cluster->stop());
    std::ofstream(gate).put('\n');
    for (auto* w : {&w1, &w2}) {
        bool timed_out = false;
        auto r = w->wait(300, &timed_out);
        INFO(r.out << r.err);
        REQUIRE_FALSE(timed_out);
        REQUIRE(r.exit_code == 1);
        REQUIRE((r.out + r.err).find("the server did not come back within") != std::string::npos);
    }
    const auto stopped_at = LedgerStage::read_ledger(ledger);
    for (const auto& [line, count] : stopped_at) REQUIRE(count == 1);

    // Back up: a worker takes the dead ones' leases over once they expire,
    // closes what they left open, and finishes with nothing done twice.
    REQUIRE(cluster->restart());
    auto finisher = run_child(worker_argv(url, fleet, "finisher"), ledger_env(ledger));
    INFO(finisher.out << finisher.err);
    REQUIRE(finisher.exit_code == 0);
    require_exactly_once(ledger, nodes);
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE ended_ms = 0") == 0);
    require_converged(url, fleet, ledger);
}

TEST_CASE("workers: max_unavailable holds fleet-wide across three workers", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    // Each worker alone would take up to max_unavailable nodes out: three
    // would reach three times that without the database's slots.
    for (const int limit : {1, 2}) {
        INFO("max_unavailable = " << limit);
        TempDir dir;
        const int nodes = 6;
        const auto fleet =
            kiln::test::write_cli_fleet(dir, nodes, "parallel = 4\nmax_unavailable = " + std::to_string(limit));
        const auto ledger = dir.file("ledger");
        const auto url = cluster->create_database();
        run_three_workers(url, fleet, ledger_env(ledger, 30), dir);
        require_exactly_once(ledger, nodes);
        const int peak = peak_out_of_service(ledger);
        INFO("peak out of service " << peak);
        REQUIRE(peak >= 1);
        REQUIRE(peak <= limit);
        PgRaw raw(url);
        REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE worker <> ''") == 0);  // all given back
        REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE key = 'unavailable'") == limit);
        require_converged(url, fleet, ledger);
    }
}

TEST_CASE("workers: a worker waiting on a held node is woken by LISTEN/NOTIFY, not its poll", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const auto fleet = kiln::test::write_cli_fleet(dir, 1, "parallel = 1");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    // The holder stops at gamma's gate with alpha and beta verified, each
    // under its own stage claim's generation: the waiter starts while the
    // lease is at gamma's and must still count alpha and beta as done.
    const auto gate = dir.file("gate");
    auto holder_env = ledger_env(ledger);
    holder_env["KILN_TEST_GATE"] = gate;
    holder_env["KILN_TEST_GATE_STAGE"] = "gamma";
    RunningChild holder(worker_argv(url, fleet, "holder"), holder_env, dir.file("holder"));
    PgRaw raw(url);
    // ("" until the schema and the row are there)
    auto lease_stage = [&] { return raw.text("SELECT stage FROM leases WHERE node = 'n1' AND worker = 'holder'"); };
    REQUIRE(wait_until([&] { return lease_stage() == "gamma"; }, 120));
    // The waiter polls every 300 s: it can only finish within the bound
    // below if the holder's release wakes it.
    auto waiter_argv = worker_argv(url, fleet, "waiter");
    waiter_argv[waiter_argv.size() - 3] = "300s";  // --lease-ttl
    waiter_argv[waiter_argv.size() - 1] = "300s";  // --poll
    RunningChild waiter(waiter_argv, ledger_env(ledger), dir.file("waiter"));
    // Its run is on record once it has read the leases (Engine::Run::begin).
    REQUIRE(wait_until([&] { return raw.integer("SELECT count(*) FROM runs") == 2; }, 120));
    std::ofstream(gate).put('\n');
    bool timed_out = false;
    auto h = holder.wait(120, &timed_out);
    INFO(h.out << h.err);
    REQUIRE_FALSE(timed_out);
    REQUIRE(h.exit_code == 0);
    auto w = waiter.wait(120, &timed_out);
    INFO(w.out << w.err);
    REQUIRE_FALSE(timed_out);  // woken, since its first poll was 300 s away
    REQUIRE(w.exit_code == 0);
    require_exactly_once(ledger, 1);
    // It found the node verified by the holder during its hold, the stages
    // before the one it was found at too: nothing claimed, observed or
    // done again.
    REQUIRE(claimed_by(raw, "waiter").empty());
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE run_id = (SELECT max(id) FROM runs)") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM stage_results WHERE run_id = (SELECT max(id) FROM runs)") == 0);
}

TEST_CASE("workers: a node parked longer than its lease keeps the lease and finishes once", "[worker][pg][parking]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const int nodes = 4;
    dir.write("pipelines/park-node.toml", "schema = 1\nname = \"park-node\"\nstages = [\"t-park\"]\n");
    std::string toml =
        "schema = 1\n\n[fleet]\nname = \"parkworkers\"\npipelines = \"pipelines\"\n\n[limits]\n"
        "parallel = 4\n\n[[racks]]\nname = \"r1\"\n";
    for (int i = 1; i <= nodes; ++i)
        toml +=
            "\n[[nodes]]\nname = \"p" + std::to_string(i) +
            "\"\nrack = \"r1\"\nrole = \"park-node\"\nbmc = { url = \"https://127.0.0.1:" + std::to_string(9200 + i) +
            "\", username = \"root\", password = \"env:KILN_TEST_BMC_PASSWORD\" }\n";
    const std::string fleet = dir.write("fleet.toml", toml);
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    // Each wait (5 s) outlasts the lease (2 s) more than twice: only the
    // heartbeat, renewing while no thread runs the node, keeps it.
    RunningChild worker(worker_argv(url, fleet, "wP"), {{"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_PARK_MS", "5000"}},
                        dir.file("wP"));
    bool timed_out = false;
    auto r = worker.wait(120, &timed_out);
    INFO(r.out << r.err);
    REQUIRE_FALSE(timed_out);
    REQUIRE(r.exit_code == 0);
    auto done = LedgerStage::read_ledger(ledger);
    REQUIRE(done.size() == static_cast<size_t>(2 * nodes));  // each start and done
    for (const auto& [line, count] : done) REQUIRE(count == 1);
    PgRaw raw(url);
    // No resume found its lease unconfirmed (that ends the action
    // "interrupted" and starts the stage over), none was lost.
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE outcome <> 'ok'") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM actions") == nodes);
    REQUIRE(raw.integer("SELECT count(*) FROM leases WHERE worker <> ''") == 0);
}

TEST_CASE(
    "workers: a name held exclusively (a spine) is held by one worker at a time, and a killed holder's "
    "hold expires",
    "[worker][pg][exclusive]") {
    NEED_CLUSTER(cluster);
    const std::string name = "switch:spine-1";
    TempDir dir;
    const int nodes = 6;
    // Each worker alone would run 4 at once: the spine is what holds them back.
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 4");
    const auto ledger = dir.file("ledger");
    const auto probe = dir.file("probe");
    const auto url = cluster->create_database();
    auto env = ledger_env(ledger, 30);
    env["KILN_TEST_PROBE"] = probe;
    env["KILN_TEST_EXCLUSIVE"] = name;
    PgRaw raw(url);

    // A worker killed right after its first side effect, holding the name.
    {
        auto e = env;
        e["KILN_TEST_KILL_AT"] = "1";
        e["KILN_TEST_KILL_PHASE"] = "after";
        RunningChild killed(worker_argv(url, fleet, "wK"), e, dir.file("wK"));
        bool timed_out = false;
        auto r = killed.wait(120, &timed_out);
        INFO(r.out << r.err);
        REQUIRE_FALSE(timed_out);
        REQUIRE(r.exit_code != 0);
        REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE key = 'lock:" + name + "' AND worker = 'wK'") == 1);
    }
    // The probe counted the dead worker's apply as still running: start over.
    std::remove(probe.c_str());

    run_three_workers(url, fleet, env, dir);
    require_exactly_once(ledger, nodes);
    auto peaks = LedgerStage::read_probe_peaks(probe);
    INFO("peak applies at once " << peaks["total"]);
    REQUIRE(peaks["total"] == 1);
    INFO("held slot rows: " << raw.text("SELECT string_agg(key || '/' || slot || ' ' || worker || ' ' || node, ', ') "
                                        "FROM slots WHERE worker <> ''"));
    // Every live worker gave its holds back. The killed one's rows stay
    // under its name until another worker needs that slot: expired, free.
    REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE worker <> '' AND worker <> 'wK'") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM slots WHERE worker = 'wK' AND lease_until_ms > "
                        "(extract(epoch from clock_timestamp()) * 1000)::bigint") == 0);
    require_converged(url, fleet, ledger);
}

TEST_CASE("workers: a node-stage another worker verified during the run is not observed again", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const int nodes = 6;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 4");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    // No action runs until all three workers have begun their runs (a run
    // is journaled once it has read the leases): what each then sees
    // verified by another was verified during its own run.
    const auto gate = dir.file("gate");
    auto env = ledger_env(ledger, 50);
    env["KILN_TEST_GATE"] = gate;
    PgRaw raw(url);
    std::vector<std::unique_ptr<RunningChild>> workers;
    for (const char* id : {"w1", "w2", "w3"})
        workers.push_back(std::make_unique<RunningChild>(worker_argv(url, fleet, id), env, dir.file(id)));
    const bool all_began = wait_until(
        [&] {
            // The first worker creates the schema: until then there is no table.
            if (raw.integer("SELECT count(*) FROM pg_tables WHERE tablename = 'runs'") == 0) return false;
            return raw.integer("SELECT count(*) FROM runs") >= 3;
        },
        120);
    std::ofstream(gate).put('\n');
    REQUIRE(all_began);
    require_all_exit_ok(workers);
    require_exactly_once(ledger, nodes);
    // One result per node-stage, the verifying worker's: the other two
    // neither claimed it again nor journaled a skip (before: a "skipped"
    // row from each of them, up to two per node-stage).
    INFO(raw.text("SELECT string_agg(node || '/' || stage || ':' || outcome, ' ') FROM stage_results"));
    CHECK(raw.integer("SELECT count(*) FROM stage_results WHERE outcome = 'skipped'") == 0);
    CHECK(raw.integer("SELECT count(*) FROM stage_results") == int64_t{nodes} * kStages);
    CHECK(raw.integer("SELECT count(*) FROM verified WHERE generation > 0") == int64_t{nodes} * kStages);
    require_converged(url, fleet, ledger);
}
