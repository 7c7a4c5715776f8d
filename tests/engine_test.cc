// The engine with test-only stages: ordering, limits, retries, failures,
// timeouts, skipping, stops. Every assertion reads an observable effect.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>

#include "provisioner/engine/engine.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_stages.h"

using namespace std::chrono_literals;
using kiln::engine::Engine;
using kiln::engine::RunOptions;
using kiln::engine::StageRegistry;
using kiln::engine::StopToken;
using kiln::test::ConcurrencyProbe;
using kiln::test::LedgerStage;
using kiln::test::ScriptedStage;
using kiln::test::TempDir;

namespace {

struct Harness {
    TempDir dir;
    std::unique_ptr<kiln::journal::Store> store;
    StageRegistry registry;
    StopToken stop;
    Harness() {
        auto s = kiln::journal::open_sqlite_store(dir.file("journal.db"), {});
        REQUIRE(s.ok());
        store = std::move(*s);
    }
    std::string ledger() const { return dir.file("ledger"); }
    std::shared_ptr<LedgerStage> ledger_stage(const std::string& name, int actions = 2, bool hands_over = false) {
        LedgerStage::Options o;
        o.name = name;
        o.ledger = ledger();
        o.actions = actions;
        o.hands_over = hands_over;
        auto s = std::make_shared<LedgerStage>(o);
        registry.add(s);
        return s;
    }
    kiln::engine::RunReport run(const kiln::config::Fleet& fleet, RunOptions opts = {}) {
        opts.seed = 1;
        Engine e(fleet, registry, store.get(), nullptr, stop);
        auto r = e.run(opts);
        REQUIRE(r.ok());
        return *r;
    }
    std::vector<std::string> ledger_lines() const {
        std::vector<std::string> out;
        std::ifstream in(ledger());
        for (std::string l; std::getline(in, l);) out.push_back(l);
        return out;
    }
};

const kiln::engine::NodeOutcome& outcome(const kiln::engine::RunReport& r, const std::string& node) {
    for (const auto& n : r.nodes)
        if (n.node == node) return n;
    FAIL("no node " << node);
    return r.nodes.front();
}

}  // namespace

TEST_CASE("engine: stages run in pipeline order per node, every action once", "[engine]") {
    Harness h;
    h.ledger_stage("alpha");
    h.ledger_stage("beta");
    h.ledger_stage("gamma", 2, true);
    auto fleet = kiln::test::make_fleet(6, 2, {"alpha", "beta", "gamma"});
    auto report = h.run(fleet);
    REQUIRE(report.status == kiln::engine::RunStatus::Completed);
    REQUIRE(report.actions == 36);
    auto lines = h.ledger_lines();
    REQUIRE(lines.size() == 36);
    std::map<std::string, std::vector<std::string>> per_node;
    for (const auto& l : lines) per_node[l.substr(0, l.find(' '))].push_back(l.substr(l.find(' ') + 1));
    for (const auto& [node, seq] : per_node) {
        REQUIRE(seq == std::vector<std::string>{"alpha a0", "alpha a1", "beta a0", "beta a1", "gamma a0", "gamma a1"});
        REQUIRE(outcome(report, node).state == kiln::engine::NodeState::Ready);
    }
    auto states = h.store->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == 6);
    for (const auto& s : *states) REQUIRE(s.state == "ready");
}

TEST_CASE("engine: a second run performs no action and skips every stage", "[engine]") {
    Harness h;
    h.ledger_stage("alpha");
    h.ledger_stage("beta", 3, true);
    auto fleet = kiln::test::make_fleet(4, 1, {"alpha", "beta"});
    auto first = h.run(fleet);
    REQUIRE(first.actions == 20);
    auto second = h.run(fleet);
    REQUIRE(second.status == kiln::engine::RunStatus::Completed);
    REQUIRE(second.actions == 0);
    REQUIRE(second.stages_skipped == 8);
    REQUIRE(second.stages_run == 0);
    REQUIRE(h.ledger_lines().size() == 20);
    for (const auto& n : second.nodes) REQUIRE(n.state == kiln::engine::NodeState::Ready);

    // A changed input re-verifies (but the converged ledger needs no action).
    fleet.nodes[0].labels["slot"] = "u12";
    auto third = h.run(fleet);
    REQUIRE(third.actions == 0);
    REQUIRE(third.stages_run == 2);  // n001's alpha and beta verified again
    REQUIRE(third.stages_skipped == 6);
}

TEST_CASE("engine: plan changes nothing and reports work, then convergence", "[engine]") {
    Harness h;
    h.ledger_stage("alpha");
    auto fleet = kiln::test::make_fleet(3, 1, {"alpha"});
    Engine e(fleet, h.registry, h.store.get(), nullptr, h.stop);
    auto before = e.plan({});
    REQUIRE(before.ok());
    REQUIRE(before->has_work());
    REQUIRE(before->entries.size() == 3);
    REQUIRE(before->entries[0].actions.size() == 2);
    REQUIRE(h.ledger_lines().empty());
    auto runs = h.store->runs(10);
    REQUIRE(runs.ok());
    REQUIRE(runs->empty());
    h.run(fleet);
    auto after = e.plan({});
    REQUIRE(after.ok());
    REQUIRE_FALSE(after->has_work());
    for (const auto& entry : after->entries) REQUIRE(entry.status == kiln::engine::PlanStatus::Converged);
}

TEST_CASE("engine: the global parallel limit is reached and never exceeded", "[engine][limits]") {
    Harness h;
    auto probe = std::make_shared<ConcurrencyProbe>("probe", 3);
    h.registry.add(probe);
    kiln::config::Limits l;
    l.parallel = 3;
    auto fleet = kiln::test::make_fleet(12, 1, {"probe"}, l);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    REQUIRE(probe->applies() == 12);
    REQUIRE(probe->max_total() == 3);
    REQUIRE_FALSE(probe->target_timeouts());
}

TEST_CASE("engine: per-rack limit holds while other racks proceed", "[engine][limits]") {
    Harness h;
    auto probe = std::make_shared<ConcurrencyProbe>("probe", 6);  // 3 racks x 2
    h.registry.add(probe);
    kiln::config::Limits l;
    l.parallel = 16;
    l.per_rack = 2;
    auto fleet = kiln::test::make_fleet(12, 3, {"probe"}, l);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    REQUIRE(probe->max_per_rack() == 2);
    REQUIRE(probe->max_total() == 6);
}

TEST_CASE("engine: per-BMC limit caps stages sharing one BMC", "[engine][limits]") {
    Harness h;
    auto probe = std::make_shared<ConcurrencyProbe>("probe", 4, "bmc");  // 4 BMCs, 1 each
    h.registry.add(probe);
    kiln::config::Limits l;
    l.parallel = 16;
    l.per_bmc = 1;
    auto fleet = kiln::test::make_fleet(12, 1, {"probe"}, l, /*nodes_per_bmc=*/3);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    REQUIRE(probe->applies() == 12);
    REQUIRE(probe->max_per_resource() == 1);
    REQUIRE(probe->max_total() == 4);
}

TEST_CASE("engine: max_unavailable bounds nodes in progress at once", "[engine][limits]") {
    Harness h;
    h.ledger_stage("alpha");
    h.ledger_stage("beta", 2, true);
    kiln::config::Limits l;
    l.parallel = 8;
    l.max_unavailable = 2;
    auto fleet = kiln::test::make_fleet(8, 1, {"alpha", "beta"}, l);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    // Replay the ledger: a node is in progress from its first line to its last.
    std::map<std::string, int> remaining;
    for (const auto& n : fleet.nodes) remaining[n.name] = 4;
    std::set<std::string> open;
    size_t peak = 0;
    for (const auto& line : h.ledger_lines()) {
        auto node = line.substr(0, line.find(' '));
        open.insert(node);
        peak = std::max(peak, open.size());
        if (--remaining[node] == 0) open.erase(node);
    }
    REQUIRE(peak <= 2);
    REQUIRE(h.ledger_lines().size() == 32);
}

namespace {

// A no-op stage that counts how often the engine asks for its resources:
// once each time the dispatcher considers a node, so the count tells how
// often blocked nodes were requeued.
class CountingStage : public kiln::engine::Stage {
public:
    std::string name() const override { return "count"; }
    std::vector<std::string> resources(const kiln::config::Fleet&, const kiln::config::Node& node) const override {
        ++asked;
        return {"bmc:" + node.bmc.url};
    }
    kiln::Result<kiln::engine::Observation> observe(kiln::engine::StageContext&) override {
        return kiln::engine::Observation{};
    }
    kiln::Result<std::vector<kiln::engine::Action>> plan(kiln::engine::StageContext&,
                                                         const kiln::engine::Observation&) override {
        return std::vector<kiln::engine::Action>{{"noop", "no-op"}};
    }
    kiln::Status apply(kiln::engine::StageContext&, const kiln::engine::Action&) override { return {}; }
    kiln::Status verify(kiln::engine::StageContext&) override { return {}; }
    mutable std::atomic<long> asked{0};
};

}  // namespace

TEST_CASE("engine: nodes held by max_unavailable are woken one per finish, not all requeued", "[engine][limits]") {
    // 600 nodes, one out of service at a time: requeueing every blocked
    // node on each finish considers ~180,000 nodes; waking one per freed
    // slot considers each node a few times.
    Harness h;
    auto s = std::make_shared<CountingStage>();
    h.registry.add(s);
    kiln::config::Limits l;
    l.parallel = 16;
    l.max_unavailable = 1;
    const int nodes = 600;
    auto fleet = kiln::test::make_fleet(nodes, 3, {"count"}, l);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    REQUIRE(r.actions == nodes);
    INFO("resources asked " << s->asked.load() << " times");
    REQUIRE(s->asked.load() <= 6L * nodes);
}

TEST_CASE("engine: a node woken for a free slot but held by another limit passes the slot on", "[engine][limits]") {
    // Two nodes per BMC and per_bmc = 1, with max_unavailable = 2: a node
    // woken for an unavailable slot may find its BMC busy; the slot must go
    // to the next node, or the run would end with nodes never started.
    Harness h;
    auto s = std::make_shared<CountingStage>();
    h.registry.add(s);
    kiln::config::Limits l;
    l.parallel = 8;
    l.per_bmc = 1;
    l.max_unavailable = 2;
    auto fleet = kiln::test::make_fleet(40, 2, {"count"}, l, 2);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    REQUIRE(r.actions == 40);
    for (const auto& n : r.nodes) REQUIRE(n.state == kiln::engine::NodeState::Pending);
}

TEST_CASE("engine: max_unavailable halts a rollout after failures", "[engine][limits]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    kiln::config::Limits l;
    l.parallel = 1;
    l.max_unavailable = 1;
    auto fleet = kiln::test::make_fleet(3, 1, {"work"}, l);
    s->script("n001", ScriptedStage::Mode::Permanent);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Failed);
    REQUIRE(outcome(r, "n001").state == kiln::engine::NodeState::Failed);
    REQUIRE(outcome(r, "n002").detail == "blocked: max_unavailable reached");
    REQUIRE(s->attempts("n002") == 0);
    REQUIRE(s->attempts("n003") == 0);
}

TEST_CASE("engine: transient errors retry with backoff, then succeed", "[engine][retry]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    kiln::config::Limits l;
    l.retries = 3;
    l.backoff_initial = 1ms;
    l.backoff_max = 4ms;
    auto fleet = kiln::test::make_fleet(2, 1, {"work"}, l);
    s->script("n001", ScriptedStage::Mode::FlakyThenOk, 2);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Completed);
    REQUIRE(s->attempts("n001") == 3);
    REQUIRE(s->successes("n001") == 1);
    REQUIRE(s->attempts("n002") == 1);
    auto hist = h.store->history("n001", 0);
    REQUIRE(hist.ok());
    int retries = 0;
    for (const auto& e : *hist) retries += e.kind == "event" && e.name == "retry";
    REQUIRE(retries == 2);
}

TEST_CASE("engine: transient errors give up after the retry budget", "[engine][retry]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    kiln::config::Limits l;
    l.retries = 2;
    l.backoff_initial = 1ms;
    l.backoff_max = 2ms;
    auto fleet = kiln::test::make_fleet(1, 1, {"work"}, l);
    s->script("n001", ScriptedStage::Mode::AlwaysTransient);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Failed);
    REQUIRE(s->attempts("n001") == 3);
    REQUIRE(outcome(r, "n001").state == kiln::engine::NodeState::Failed);
    REQUIRE_THAT(outcome(r, "n001").error, Catch::Contains("gave up after 3 attempts"));
}

TEST_CASE("engine: a permanent failure stops that node only", "[engine]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    h.ledger_stage("after", 1, true);
    auto fleet = kiln::test::make_fleet(4, 2, {"work", "after"});
    s->script("n002", ScriptedStage::Mode::Permanent);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Failed);
    REQUIRE(s->attempts("n002") == 1);  // permanent: no retry
    REQUIRE(outcome(r, "n002").state == kiln::engine::NodeState::Failed);
    REQUIRE(outcome(r, "n002").stage == "work");
    REQUIRE_THAT(outcome(r, "n002").error, Catch::Contains("firmware image rejected"));
    for (const char* n : {"n001", "n003", "n004"}) REQUIRE(outcome(r, n).state == kiln::engine::NodeState::Ready);
    auto lines = h.ledger_lines();
    REQUIRE(lines.size() == 3);
    for (const auto& l : lines) REQUIRE(l.rfind("n002", 0) != 0);
    // The journal remembers the failure for `kiln status`.
    auto states = h.store->node_states();
    REQUIRE(states.ok());
    for (const auto& st : *states)
        if (st.node == "n002") REQUIRE(st.state == "failed");
}

TEST_CASE("engine: a stage past its timeout fails with the limit named", "[engine][timeout]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    kiln::config::Limits l;
    l.stage_timeouts["work"] = 100ms;
    auto fleet = kiln::test::make_fleet(2, 1, {"work"}, l);
    s->script("n001", ScriptedStage::Mode::Hang);
    auto r = h.run(fleet);
    REQUIRE(outcome(r, "n001").state == kiln::engine::NodeState::Failed);
    REQUIRE(outcome(r, "n001").detail == "timed_out");
    REQUIRE_THAT(outcome(r, "n001").error, Catch::Contains("timed out after 100ms"));
    REQUIRE(outcome(r, "n002").state == kiln::engine::NodeState::Pending);  // verified, not handed over
    REQUIRE(outcome(r, "n002").detail == "verified");
}

TEST_CASE("engine: a stage's timeout covers its retries, not each attempt", "[engine][timeout][retry]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    kiln::config::Limits l;
    l.stage_timeouts["work"] = 1000ms;
    l.retries = 10;
    l.backoff_initial = 1ms;
    l.backoff_max = 2ms;
    auto fleet = kiln::test::make_fleet(1, 1, {"work"}, l);
    // Each attempt works 300 ms and fails transiently: 11 attempts would take
    // 3.3 s, which a deadline per attempt would allow.
    s->script("n001", ScriptedStage::Mode::SlowTransient, 300);
    auto r = h.run(fleet);
    REQUIRE(outcome(r, "n001").state == kiln::engine::NodeState::Failed);
    CHECK(outcome(r, "n001").detail == "timed_out");
    CHECK_THAT(outcome(r, "n001").error, Catch::Contains("timed out after 1s"));
    CHECK(s->attempts("n001") <= 4);  // 1000 ms / 300 ms, whatever the machine's speed
    CHECK(s->attempts("n001") >= 1);
}

TEST_CASE("engine: a quarantining error quarantines the node", "[engine]") {
    Harness h;
    auto s = std::make_shared<ScriptedStage>("work");
    h.registry.add(s);
    auto fleet = kiln::test::make_fleet(2, 1, {"work"});
    s->script("n001", ScriptedStage::Mode::Quarantine);
    auto r = h.run(fleet);
    REQUIRE(outcome(r, "n001").state == kiln::engine::NodeState::Quarantined);
    REQUIRE_THAT(outcome(r, "n001").error, Catch::Contains("pending row remaps"));
}

TEST_CASE("engine: a stop lets the action in flight finish and starts nothing else", "[engine][stop]") {
    Harness h;
    // A stage whose first action asks for the stop, as SIGINT would.
    struct StoppingStage : LedgerStage {
        StopToken* stop;
        StoppingStage(LedgerStage::Options o, StopToken* s) : LedgerStage(std::move(o)), stop(s) {}
        kiln::Status apply(kiln::engine::StageContext& ctx, const kiln::engine::Action& a) override {
            stop->request_soft();
            return LedgerStage::apply(ctx, a);
        }
    };
    LedgerStage::Options o;
    o.name = "alpha";
    o.ledger = h.ledger();
    o.actions = 3;
    h.registry.add(std::make_shared<StoppingStage>(o, &h.stop));
    kiln::config::Limits l;
    l.parallel = 1;
    auto fleet = kiln::test::make_fleet(3, 1, {"alpha"}, l);
    auto r = h.run(fleet);
    REQUIRE(r.status == kiln::engine::RunStatus::Interrupted);
    REQUIRE(h.ledger_lines() == std::vector<std::string>{"n001 alpha a0"});
    REQUIRE(outcome(r, "n001").detail == "interrupted");
    REQUIRE_THAT(outcome(r, "n001").error, Catch::Contains("stopped before action a1 (1 of 3 done)"));
    REQUIRE(outcome(r, "n002").detail == "not started");
    auto runs = h.store->runs(1);
    REQUIRE(runs.ok());
    REQUIRE(runs->front().status == "interrupted");
}

namespace {

// The journal of a run whose writes for one node fail (a full disk, a lost
// connection): everything else goes to the real store underneath.
class FailingWrites : public kiln::journal::Store {
public:
    enum class What { NodeState, ActionEnd };
    FailingWrites(kiln::journal::Store& inner, std::string node, What what)
        : inner_(inner), node_(std::move(node)), what_(what) {}

    kiln::Result<int64_t> begin_run(const kiln::journal::RunInfo& info) override { return inner_.begin_run(info); }
    kiln::Status end_run(int64_t run_id, const std::string& status) override { return inner_.end_run(run_id, status); }
    kiln::Result<std::vector<kiln::journal::RunSummary>> runs(int limit) override { return inner_.runs(limit); }
    kiln::Result<std::optional<std::string>> last_verified_hash(const std::string& node,
                                                                const std::string& stage) override {
        return inner_.last_verified_hash(node, stage);
    }
    kiln::Status record_stage(const kiln::journal::StageRecord& record) override { return inner_.record_stage(record); }
    kiln::Status forget_verified(const std::string& node, const std::string& stage) override {
        return inner_.forget_verified(node, stage);
    }
    kiln::Result<int64_t> begin_action(int64_t run_id, const std::string& node, const std::string& stage,
                                       const std::string& action_id, const std::string& description) override {
        auto row = inner_.begin_action(run_id, node, stage, action_id, description);
        if (row && node == node_) {
            std::lock_guard<std::mutex> l(mu_);
            rows_.insert(*row);
        }
        return row;
    }
    kiln::Status end_action(int64_t row, const std::string& outcome, const std::string& error) override {
        {
            std::lock_guard<std::mutex> l(mu_);
            if (what_ == What::ActionEnd && rows_.count(row)) return refuse();
        }
        return inner_.end_action(row, outcome, error);
    }
    kiln::Status record_event(const kiln::journal::EventRecord& event) override { return inner_.record_event(event); }
    kiln::Status set_node_state(const kiln::journal::NodeState& state) override {
        if (what_ == What::NodeState && state.node == node_) return refuse();
        return inner_.set_node_state(state);
    }
    kiln::Result<std::vector<kiln::journal::NodeState>> node_states() override { return inner_.node_states(); }
    kiln::Result<std::vector<kiln::journal::HistoryEntry>> history(const std::string& node, int limit) override {
        return inner_.history(node, limit);
    }

private:
    static kiln::Error refuse() { return kiln::Error{"journal", "journal.io", "disk I/O error (the test's)"}; }
    kiln::journal::Store& inner_;
    std::string node_;
    What what_;
    std::mutex mu_;
    std::set<int64_t> rows_;
};

}  // namespace

TEST_CASE("engine: a journal write that fails fails its node with journal.write and stops the run", "[engine][stop]") {
    Harness h;
    h.ledger_stage("alpha", 2, true);
    kiln::config::Limits l;
    l.parallel = 1;  // fleet order, one node at a time: what comes after n003 never starts
    auto fleet = kiln::test::make_fleet(5, 1, {"alpha"}, l);
    auto what = FailingWrites::What::NodeState;
    std::string said;
    SECTION("the node's state") {
        what = FailingWrites::What::NodeState;
        said = "the state running of n003";
    }
    SECTION("an action's end") {
        what = FailingWrites::What::ActionEnd;
        said = "the end of action";
    }
    FailingWrites journal(*h.store, "n003", what);
    Engine e(fleet, h.registry, &journal, nullptr, h.stop);
    RunOptions opts;
    opts.seed = 1;
    auto run = e.run(opts);
    REQUIRE(run.ok());
    const auto& r = *run;
    INFO(outcome(r, "n003").error);
    CHECK(r.status == kiln::engine::RunStatus::Failed);
    CHECK(outcome(r, "n003").state == kiln::engine::NodeState::Failed);
    CHECK_THAT(outcome(r, "n003").error,
               Catch::Contains("journal.write") && Catch::Contains(said) && Catch::Contains("disk I/O error"));
    for (const std::string done : {"n001", "n002"}) CHECK(outcome(r, done).state == kiln::engine::NodeState::Ready);
    for (const std::string later : {"n004", "n005"}) CHECK(outcome(r, later).detail == "not started");
    // No action of n003 ran without the journal knowing of it: with its
    // state refused, none ran at all.
    if (what == FailingWrites::What::NodeState) {
        for (const auto& line : h.ledger_lines()) CHECK(line.rfind("n003", 0) != 0);
    }
    auto runs = h.store->runs(1);
    REQUIRE(runs.ok());
    CHECK(runs->front().status == "failed");
}

TEST_CASE("engine: unimplemented or unknown selections fail before anything runs", "[engine]") {
    Harness h;
    h.ledger_stage("alpha");
    auto fleet = kiln::test::make_fleet(2, 1, {"alpha", "firmware"});
    Engine e(fleet, h.registry, h.store.get(), nullptr, h.stop);
    auto r = e.run({});
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == "stage.not_implemented");
    REQUIRE_THAT(r.error().message, Catch::Contains("stage 'firmware' is not implemented"));
    REQUIRE(h.ledger_lines().empty());
    auto runs = h.store->runs(10);
    REQUIRE(runs.ok());
    REQUIRE(runs->empty());  // nothing journaled

    RunOptions only_alpha;
    only_alpha.stages = {"alpha"};
    REQUIRE(e.check(only_alpha).ok());
    RunOptions bad_node;
    bad_node.nodes = {"nope"};
    auto b = e.check(bad_node);
    REQUIRE_FALSE(b.ok());
    REQUIRE(b.error().code == "node.unknown");

    // The core names no stage: one the registry neither declares nor
    // implements is unknown; once declared it is known, but not built in.
    RunOptions only_firmware;
    only_firmware.stages = {"firmware"};
    auto unknown = e.check(only_firmware);
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.error().code == "stage.unknown");
    h.registry.declare("firmware");
    auto declared = e.check(only_firmware);
    REQUIRE_FALSE(declared.ok());
    CHECK(declared.error().code == "stage.not_implemented");
    CHECK(h.registry.ordered_names() == std::vector<std::string>{"firmware", "alpha"});
}

TEST_CASE("engine: input hashes chain, so an upstream change re-runs what follows", "[engine]") {
    Harness h;
    // beta's own inputs never change: only the chain can move its hash.
    struct ConstInputs : LedgerStage {
        using LedgerStage::LedgerStage;
        kiln::Result<nlohmann::json> inputs(const kiln::engine::StageContext&) const override {
            return nlohmann::json{{"const", 1}};
        }
    };
    h.ledger_stage("alpha");
    LedgerStage::Options o;
    o.name = "beta";
    o.ledger = h.ledger();
    h.registry.add(std::make_shared<ConstInputs>(o));
    auto fleet = kiln::test::make_fleet(1, 1, {"alpha", "beta"});
    h.run(fleet);
    Engine e(fleet, h.registry, h.store.get(), nullptr, h.stop);
    auto p1 = e.plan({});
    REQUIRE(p1.ok());
    REQUIRE(p1->entries[1].status == kiln::engine::PlanStatus::Converged);
    fleet.nodes[0].labels["x"] = "y";  // alpha's inputs change...
    auto p2 = e.plan({});
    REQUIRE(p2.ok());
    REQUIRE(p2->entries[0].input_hash != p1->entries[0].input_hash);
    REQUIRE(p2->entries[1].input_hash != p1->entries[1].input_hash);  // ...and so beta's hash
    REQUIRE(p2->entries[1].status == kiln::engine::PlanStatus::Work);
    fleet.nodes[0].labels.erase("x");  // back as it was: converged again
    auto p3 = e.plan({});
    REQUIRE(p3->entries[1].input_hash == p1->entries[1].input_hash);
    REQUIRE_FALSE(p3->has_work());
}

// kiln reimage runs another pipeline over some of the node's stages; what it
// verifies must count for the node's own pipeline, or the next plan redoes
// everything after a reimage.
TEST_CASE("engine: a reimage run leaves the node's own pipeline converged", "[engine]") {
    Harness h;
    h.ledger_stage("alpha");
    h.ledger_stage("beta");
    h.ledger_stage("gamma");
    auto fleet = kiln::test::make_fleet(1, 1, {"alpha", "beta", "gamma"});
    kiln::config::Pipeline reimage;
    reimage.name = "reimage";
    reimage.stages = {"beta", "gamma"};
    fleet.pipelines["reimage"] = reimage;
    h.run(fleet);
    RunOptions again;
    again.pipeline = "reimage";
    again.reimage = true;
    auto r = h.run(fleet, again);
    REQUIRE(outcome(r, "n001").state != kiln::engine::NodeState::Failed);
    Engine e(fleet, h.registry, h.store.get(), nullptr, h.stop);
    auto p = e.plan({});
    REQUIRE(p.ok());
    for (const auto& entry : p->entries) CHECK(entry.status == kiln::engine::PlanStatus::Converged);
    CHECK_FALSE(p->has_work());
}

// Runs and plans hold input hashes in 32 bytes (StageHash); what they show
// and journal must still be chain_hash's own 64 hex digits.
TEST_CASE("engine: the input hash a plan shows and a run journals is chain_hash's, digit for digit", "[engine]") {
    Harness h;
    h.ledger_stage("alpha");
    h.ledger_stage("beta");
    auto fleet = kiln::test::make_fleet(2, 1, {"alpha", "beta"});
    const auto& node = fleet.nodes[1];
    const std::string alpha = kiln::engine::chain_hash("alpha", kiln::engine::node_identity_inputs(node), "");
    const std::string beta = kiln::engine::chain_hash("beta", kiln::engine::node_identity_inputs(node), alpha);
    REQUIRE(alpha.size() == 64);
    CHECK(kiln::engine::StageHash(alpha).hex() == alpha);
    CHECK(kiln::engine::StageHash(beta).hex() == beta);
    CHECK_FALSE(kiln::engine::StageHash(alpha) == kiln::engine::StageHash(beta));

    Engine e(fleet, h.registry, h.store.get(), nullptr, h.stop);
    auto before = e.plan({});
    REQUIRE(before.ok());
    REQUIRE(before->entries.size() == 4);
    CHECK(before->entries[2].node == node.name);
    CHECK(before->entries[2].input_hash == alpha);
    CHECK(before->entries[3].input_hash == beta);
    h.run(fleet);
    auto journaled = h.store->last_verified_hash(node.name, "beta");
    REQUIRE(journaled.ok());
    REQUIRE(journaled->has_value());
    CHECK(**journaled == beta);
    auto after = e.plan({});
    REQUIRE(after.ok());
    CHECK(after->entries[3].last_verified == beta);
    CHECK(after->entries[3].status == kiln::engine::PlanStatus::Converged);
}

namespace {

// Observes instantly, except the first node's observe, which waits (up to
// 2 s) for `wanted` other observes: it finds out how far the plan goes on
// without it.
class FirstNodeWaits : public kiln::engine::Stage {
public:
    explicit FirstNodeWaits(int wanted) : wanted_(wanted) {}
    std::string name() const override { return "first-waits"; }
    kiln::Result<kiln::engine::Observation> observe(kiln::engine::StageContext& ctx) override {
        std::unique_lock<std::mutex> lock(mu_);
        if (ctx.node().name != "n001") {
            ++others_;
            cv_.notify_all();
            return kiln::engine::Observation{};
        }
        gave_up_ = !cv_.wait_for(lock, 2s, [&] { return others_ >= wanted_; });
        return kiln::engine::Observation{};
    }
    kiln::Result<std::vector<kiln::engine::Action>> plan(kiln::engine::StageContext&,
                                                         const kiln::engine::Observation&) override {
        return std::vector<kiln::engine::Action>{{"a", "a"}};
    }
    kiln::Status apply(kiln::engine::StageContext&, const kiln::engine::Action&) override { return {}; }
    kiln::Status verify(kiln::engine::StageContext&) override { return {}; }
    int others() {
        std::lock_guard<std::mutex> lock(mu_);
        return others_;
    }
    bool gave_up() {
        std::lock_guard<std::mutex> lock(mu_);
        return gave_up_;
    }

private:
    const int wanted_;
    std::mutex mu_;
    std::condition_variable cv_;
    int others_ = 0;
    bool gave_up_ = false;
};

}  // namespace

TEST_CASE("engine: a streamed plan hands nodes over in fleet order, holding only a window of nodes ahead",
          "[engine][plan]") {
    Harness h;
    auto stage = std::make_shared<FirstNodeWaits>(20);
    h.registry.add(stage);
    kiln::config::Limits l;
    l.parallel = 2;  // two plan threads: a window of 8 nodes
    auto fleet = kiln::test::make_fleet(40, 2, {"first-waits"}, l);
    Engine e(fleet, h.registry, h.store.get(), nullptr, h.stop);
    std::vector<std::string> order;
    int ahead_at_first = -1;
    auto summary = e.plan({}, [&](std::vector<kiln::engine::PlanEntry>& entries) {
        REQUIRE(entries.size() == 1);
        if (order.empty()) ahead_at_first = stage->others();
        order.push_back(entries[0].node);
    });
    REQUIRE(summary.ok());
    CHECK(summary->work == 40);
    CHECK(summary->actions == 40);
    CHECK(summary->converged == 0);
    CHECK(summary->errors == 0);
    REQUIRE(order.size() == fleet.nodes.size());
    for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == fleet.nodes[i].name);
    // While n001 waited, the other thread planned at most the window's
    // other 7 nodes, never the 20 n001 waited for.
    CHECK(stage->gave_up());
    CHECK(ahead_at_first >= 1);
    CHECK(ahead_at_first <= 7);
}
