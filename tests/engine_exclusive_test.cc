// Exclusive holds by name (stage.h hold_exclusive, engine/exclusive_locks.h):
// a spine's read, diff and write, one node at a time. Across workers on
// PostgreSQL: worker_pg_test.cc.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

#include "provisioner/engine/engine.h"
#include "provisioner/engine/stage.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_stages.h"

using namespace std::chrono_literals;
using kiln::engine::StageContext;
using kiln::engine::StopToken;
using kiln::test::LedgerStage;
using kiln::test::TempDir;

TEST_CASE("exclusive: a name another node holds is waited for, and the wait ends at the deadline with its holder",
          "[engine][exclusive]") {
    auto fleet = kiln::test::make_fleet(2, 1, {"x"});
    StopToken stop;
    StageContext first(fleet, fleet.nodes[0], "x", stop, StageContext::Clock::time_point::max(), nullptr, nullptr);
    auto held = first.hold_exclusive("switch:spine-exclusive-test");
    REQUIRE(held.ok());

    // Held: the second node's wait runs into its deadline and says why.
    StageContext late(fleet, fleet.nodes[1], "x", stop, StageContext::Clock::now() + 300ms, nullptr, nullptr);
    auto refused = late.hold_exclusive("switch:spine-exclusive-test");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == "exclusive.timeout");
    CHECK(refused.error().message.find("switch:spine-exclusive-test") != std::string::npos);
    CHECK(refused.error().message.find("another node of this process") != std::string::npos);

    // Another name is not held by it.
    StageContext other(fleet, fleet.nodes[1], "x", stop, StageContext::Clock::now() + 300ms, nullptr, nullptr);
    CHECK(other.hold_exclusive("switch:leaf-exclusive-test").ok());

    // A waiter with time left gets it once the holder lets go.
    StageContext waiter(fleet, fleet.nodes[1], "x", stop, StageContext::Clock::time_point::max(), nullptr, nullptr);
    std::atomic<bool> got{false};
    auto waiting = std::async(std::launch::async, [&] {
        auto h = waiter.hold_exclusive("switch:spine-exclusive-test");
        got = h.ok();
        return h.ok();
    });
    CHECK(waiting.wait_for(200ms) == std::future_status::timeout);  // still held by the first node
    CHECK_FALSE(got.load());
    held->reset();
    REQUIRE(waiting.get());
}

TEST_CASE("exclusive: a hard stop ends a wait for a held name", "[engine][exclusive]") {
    auto fleet = kiln::test::make_fleet(2, 1, {"x"});
    StopToken stop;
    StageContext first(fleet, fleet.nodes[0], "x", stop, StageContext::Clock::time_point::max(), nullptr, nullptr);
    auto held = first.hold_exclusive("switch:spine-stop-test");
    REQUIRE(held.ok());
    StopToken stopping;
    StageContext waiter(fleet, fleet.nodes[1], "x", stopping, StageContext::Clock::time_point::max(), nullptr, nullptr);
    auto waiting = std::async(std::launch::async, [&] { return waiter.hold_exclusive("switch:spine-stop-test"); });
    stopping.request_hard();
    auto r = waiting.get();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "exclusive.timeout");
    CHECK(r.error().message.rfind("stopped", 0) == 0);
}

TEST_CASE("exclusive: a run's nodes change one shared switch one at a time, however many run at once",
          "[engine][exclusive]") {
    TempDir dir;
    auto store = kiln::journal::open_sqlite_store(dir.file("journal.db"), {});
    REQUIRE(store.ok());
    kiln::engine::StageRegistry registry;
    LedgerStage::Options o;
    o.name = "spine";
    o.ledger = dir.file("ledger");
    o.actions = 2;
    o.sleep_ms = 20;
    o.probe = dir.file("probe");
    o.exclusive = "switch:spine-run-test";
    registry.add(std::make_shared<LedgerStage>(o));
    kiln::config::Limits l;
    l.parallel = 4;
    auto fleet = kiln::test::make_fleet(8, 2, {"spine"}, l);
    StopToken stop;
    kiln::engine::Engine e(fleet, registry, store->get(), nullptr, stop);
    kiln::engine::RunOptions opts;
    opts.seed = 1;
    auto r = e.run(opts);
    REQUIRE(r.ok());
    REQUIRE(r->status == kiln::engine::RunStatus::Completed);
    auto ledger = LedgerStage::read_ledger(o.ledger);
    REQUIRE(ledger.size() == 16);
    auto peaks = LedgerStage::read_probe_peaks(o.probe);
    CHECK(peaks["total"] == 1);
}
