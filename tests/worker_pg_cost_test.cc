// What a worker costs its PostgreSQL server, counted (LeaseCounters): the
// statements it sends and the commits it makes the server flush, per
// node-stage. Bounds on counts, never on time: a change that adds round
// trips or flushes to the hot path fails here (docs/store.md, "Which
// commits are flushed").
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "provisioner/engine/engine.h"
#include "provisioner/journal/leases.h"
#include "provisioner/journal/pg_store.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_stages.h"

using kiln::journal::LeaseCounters;
using kiln::test::LedgerStage;
using kiln::test::PgCluster;
using kiln::test::TempDir;

namespace {

// A database whose sessions start with synchronous_commit on: the test
// cluster runs with it off for speed, and the counters report what the
// server would flush.
std::string flushing_database(PgCluster& cluster) {
    auto url = cluster.create_database();
    kiln::test::PgRaw raw(url);
    REQUIRE(
        raw.exec("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', "
                 "current_database()); END $$"));
    return url;
}

LeaseCounters since(const LeaseCounters& before, const LeaseCounters& after) {
    return {after.renewals - before.renewals,
            after.losses - before.losses,
            after.reconnects - before.reconnects,
            after.statements - before.statements,
            after.commits_flushed - before.commits_flushed,
            after.commits_unflushed - before.commits_unflushed};
}

}  // namespace

TEST_CASE("journal cost: a leased node-stage with one action stays within its statements and flushes", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    const auto url = flushing_database(*cluster);
    auto store = kiln::journal::open_pg_store(url, {});
    REQUIRE(store.ok());
    auto* leases = (*store)->leases();
    REQUIRE(leases);
    TempDir dir;
    const std::vector<std::string> stages = {"alpha", "beta", "gamma"};
    kiln::engine::StageRegistry registry;
    for (const auto& name : stages) {
        LedgerStage::Options o;
        o.name = name;
        o.ledger = dir.file("ledger");
        o.actions = 1;
        registry.add(std::make_shared<LedgerStage>(o));
    }
    const int nodes = 12;
    kiln::config::Limits limits;
    limits.parallel = 4;         // a fleet-wide slot per stage ...
    limits.per_rack = 2;         // ... and a rack slot
    limits.max_unavailable = 6;  // ... and the node's unavailable slot
    const auto fleet = kiln::test::make_fleet(nodes, 3, stages, limits);
    kiln::engine::StopToken stop;
    kiln::engine::Engine engine(fleet, registry, store->get(), nullptr, stop);
    kiln::engine::RunOptions opts;
    opts.seed = 1;
    opts.lease_ttl = std::chrono::seconds(60);  // no renewal in the count, whatever the machine's speed

    const auto before = leases->counters();
    auto report = engine.run(opts);
    REQUIRE(report.ok());
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);
    const auto c = since(before, leases->counters());

    // Each side effect once, each node-stage verified.
    const auto ledger = LedgerStage::read_ledger(dir.file("ledger"));
    REQUIRE(ledger.size() == static_cast<size_t>(nodes * stages.size()));
    for (const auto& [line, count] : ledger) {
        INFO(line);
        REQUIRE(count == 1);
    }
    REQUIRE(report->stages_run == static_cast<int>(nodes * stages.size()));

    const double node_stages = nodes * static_cast<double>(stages.size());
    INFO("statements " << c.statements << ", flushed " << c.commits_flushed << ", unflushed " << c.commits_unflushed
                       << " for " << node_stages << " node-stages");
    // Flushed per node-stage: the claim with its slots, the action's start,
    // the stage's result; per run: its end. (Before: 7 and more per
    // node-stage, one per write.)
    REQUIRE(c.commits_flushed <= 3 * node_stages + 1);
    REQUIRE(c.commits_flushed >= 3 * node_stages);  // and none of those three went unflushed
    // Round trips: under 19 per node-stage here, with three slot keys and
    // one action (bench/scale's no-op stage: 32 before, 15.5 now).
    REQUIRE(c.statements <= 20 * node_stages);
    REQUIRE(c.renewals == 0);
}

TEST_CASE("journal cost: writes that gate a side effect are flushed, progress is not", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    const auto url = flushing_database(*cluster);
    auto store = kiln::journal::open_pg_store(url, {});
    REQUIRE(store.ok());
    auto& s = **store;
    auto* leases = s.leases();
    REQUIRE(leases);
    const auto ttl = std::chrono::seconds(60);
    auto run = s.begin_run({"worker", "f", "h", "v"});
    REQUIRE(run.ok());

    // One write at a time: what it committed, and how.
    LeaseCounters at = leases->counters();
    auto step = [&](bool ok) {
        REQUIRE(ok);
        const auto now = leases->counters();
        const auto d = since(at, now);
        at = now;
        return d;
    };
    auto flushed = [](const LeaseCounters& d) { return d.commits_flushed == 1 && d.commits_unflushed == 0; };
    auto unflushed = [](const LeaseCounters& d) { return d.commits_flushed == 0 && d.commits_unflushed == 1; };

    auto claim = leases->claim_stage("n1", "alpha", ttl, 2, {{"parallel", 4}, {"rack:r1", 1}});
    auto d = step(claim.ok());
    REQUIRE(std::holds_alternative<kiln::journal::Lease>(claim->lease));
    REQUIRE_FALSE(claim->unavailable_full);
    REQUIRE_FALSE(claim->full);
    CHECK(flushed(d));  // the fence and the limits: one flushed transaction

    CHECK(unflushed(step(s.set_node_state({"n1", "running", "", "alpha", "", 0, *run}).ok())));
    CHECK(unflushed(step(s.record_event({*run, 0, "n1", "alpha", "note", "hello"}).ok())));
    CHECK(step(s.last_verified_hash("n1", "alpha").ok()).statements == 1);

    auto action = s.begin_action(*run, "n1", "alpha", "a0", "flash");
    CHECK(flushed(step(action.ok())));  // durable before the side effect
    CHECK(unflushed(step(s.end_action(*action, "ok", "").ok())));
    d = step(s.record_stage({*run, "n1", "alpha", "h", "verified", "", 1, 1, 1, 2}).ok());
    CHECK(flushed(d));
    CHECK(d.statements <= 4);
    CHECK(unflushed(step(leases->release_slots("n1").ok())));
    // A stage found converged and skipped did nothing: its record is not flushed.
    CHECK(unflushed(step(s.record_stage({*run, "n1", "alpha", "h", "skipped", "", 1, 0, 3, 4}).ok())));

    // n2 takes the rack's one slot n1 gave back; n1's next stage then
    // finds it full: n1 keeps its lease and unavailable slot, takes no
    // stage slot (not even the free `parallel` one), and says which limit.
    auto second = leases->claim_stage("n2", "alpha", ttl, 2, {{"parallel", 4}, {"rack:r1", 1}});
    REQUIRE(second.ok());
    REQUIRE(std::holds_alternative<kiln::journal::Lease>(second->lease));
    REQUIRE_FALSE(second->full);
    auto blocked = leases->claim_stage("n1", "beta", ttl, 2, {{"parallel", 4}, {"rack:r1", 1}});
    REQUIRE(blocked.ok());
    REQUIRE(std::holds_alternative<kiln::journal::Lease>(blocked->lease));
    REQUIRE_FALSE(blocked->unavailable_full);
    REQUIRE(blocked->full == std::optional<std::string>("rack:r1"));
    kiln::test::PgRaw raw(url);
    CHECK(raw.integer("SELECT count(*) FROM slots WHERE node = 'n1' AND key <> 'unavailable'") == 0);
    CHECK(raw.integer("SELECT count(*) FROM slots WHERE node = 'n1' AND key = 'unavailable'") == 1);
    CHECK(raw.text("SELECT stage FROM leases WHERE node = 'n1'") == "beta");
    // A third node finds max_unavailable (2) full: it keeps the lease, no
    // stage slot is tried.
    auto third = leases->claim_stage("n3", "alpha", ttl, 2, {{"parallel", 4}});
    REQUIRE(third.ok());
    REQUIRE(std::holds_alternative<kiln::journal::Lease>(third->lease));
    REQUIRE(third->unavailable_full);
    CHECK(raw.integer("SELECT count(*) FROM slots WHERE node = 'n3'") == 0);
    at = leases->counters();

    // A claim another live worker's lease refuses commits nothing.
    auto other = kiln::journal::open_pg_store(url, {});
    REQUIRE(other.ok());
    auto* theirs = (*other)->leases();
    theirs->set_worker_id("other");
    const auto before = theirs->counters();
    auto refused = theirs->claim_stage("n1", "beta", ttl, 2, {{"parallel", 4}});
    REQUIRE(refused.ok());
    REQUIRE(std::holds_alternative<kiln::journal::LeaseHolder>(refused->lease));
    const auto r = since(before, theirs->counters());
    CHECK(r.commits_flushed == 0);
    CHECK(r.commits_unflushed == 0);

    // Heartbeats and releases are unflushed.
    auto renewed = leases->renew(ttl);
    d = step(renewed.ok());
    REQUIRE(renewed->empty());
    CHECK(d.commits_flushed == 0);
    CHECK(step(leases->release("n1").ok()).commits_flushed == 0);
}
