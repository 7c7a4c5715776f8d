// Parked waits (issue 20): a stage that waits hands the engine a wake-up
// time and returns its thread. Thousands of nodes wait at once on a pool
// sized to the cores; a wait's deadline and a stop each end it the way
// the stage contract says (kill -9 during parked waits: crash_test.cc).
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "provisioner/core/idle_connection_budget.h"
#include "provisioner/engine/engine.h"
#include "provisioner/engine/open_files.h"
#include "provisioner/engine/parking_lot.h"
#include "provisioner/engine/worker_pool.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/support/child.h"
#include "tests/support/cli_fleet.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/proc_status.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_stages.h"

using namespace std::chrono_literals;
using kiln::engine::Engine;
using kiln::engine::ParkingLot;
using kiln::engine::RunOptions;
using kiln::engine::StageRegistry;
using kiln::engine::StopToken;
using kiln::test::LedgerStage;
using kiln::test::ParkingStage;
using kiln::test::TempDir;
using kiln::test::ThreadSampler;

namespace {

struct Harness {
    TempDir dir;
    std::unique_ptr<kiln::journal::Store> store;
    StageRegistry registry;
    StopToken stop;
    std::shared_ptr<ParkingStage> stage;
    explicit Harness(int wait_ms, bool block = false) {
        auto s = kiln::journal::open_sqlite_store(dir.file("journal.db"), {});
        REQUIRE(s.ok());
        store = std::move(*s);
        ParkingStage::Options o;
        o.ledger = dir.file("ledger");
        o.wait_ms = wait_ms;
        o.block = block;
        stage = std::make_shared<ParkingStage>(o);
        registry.add(stage);
    }
    kiln::engine::RunReport run(const kiln::config::Fleet& fleet) {
        RunOptions opts;
        opts.seed = 1;
        Engine e(fleet, registry, store.get(), nullptr, stop);
        auto r = e.run(opts);
        INFO((r.ok() ? std::string() : r.error().str()));
        REQUIRE(r.ok());
        return *r;
    }
    std::map<std::string, int> ledger() const { return LedgerStage::read_ledger(dir.file("ledger")); }
};

kiln::config::Limits limits(int parallel) {
    kiln::config::Limits l;
    l.parallel = parallel;
    return l;
}

}  // namespace

TEST_CASE("parking lot: wakes by time, earliest first, and by key", "[engine][parking]") {
    ParkingLot lot;
    const auto t0 = ParkingLot::Clock::now();
    lot.park(1, t0 + 30s);
    lot.park(2, t0 + 10s);
    lot.park(3, t0 + 20s, "ring");
    lot.park(4, t0 + 40s, "ring");
    REQUIRE(lot.size() == 4);
    REQUIRE(*lot.next_due() == t0 + 10s);
    REQUIRE(lot.take_due(t0 + 5s).empty());
    REQUIRE(lot.take_due(t0 + 25s) == std::vector<size_t>{2, 3});
    // Node 3 resumed already: the key wakes only node 4.
    REQUIRE(lot.wake("ring") == 1);
    REQUIRE(lot.take_due(ParkingLot::Clock::now()) == std::vector<size_t>{4});
    REQUIRE(lot.wake("ring") == 0);
    // Parking again replaces the earlier entry.
    lot.park(1, t0 + 5s);
    REQUIRE(lot.size() == 1);
    REQUIRE(lot.take_due(t0 + 35s) == std::vector<size_t>{1});
    REQUIRE(lot.empty());
    REQUIRE_FALSE(lot.next_due());
}

TEST_CASE("worker pool: a blocking region lets another thread take queued work", "[engine][parking]") {
    // Core of one thread: the first task blocks until the second has run,
    // which only a thread started for the blocked one can do.
    kiln::engine::WorkerPool pool(1, 4);
    std::mutex mu;
    std::condition_variable cv;
    bool second_ran = false;
    bool first_done = false;
    pool.submit([&] {
        kiln::engine::WorkerPool::BlockingRegion blocking;
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, 20s, [&] { return second_ran; });
        first_done = second_ran;
    });
    pool.submit([&] {
        std::lock_guard<std::mutex> lock(mu);
        second_ran = true;
        cv.notify_all();
    });
    {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, 20s, [&] { return second_ran; });
    }
    REQUIRE(second_ran);
    REQUIRE(pool.threads() == 2);
}

TEST_CASE("engine: 2000 nodes parked 5 s each at parallel 2000 run on a pool bounded by the cores",
          "[engine][parking]") {
    const int nodes = 2000;
    Harness h(5000);
    auto fleet = kiln::test::make_fleet(nodes, 4, {"t-park"}, limits(nodes));
    const int before = kiln::test::proc_threads(::getpid());
    const int64_t stalls_before = kiln::engine::WorkerPool::stall_threads_started();
    ThreadSampler sampler;
    auto report = h.run(fleet);
    sampler.stop();
    const int64_t stall_threads = kiln::engine::WorkerPool::stall_threads_started() - stalls_before;

    REQUIRE(report.status == kiln::engine::RunStatus::Completed);
    REQUIRE(report.actions == nodes);
    REQUIRE(h.stage->starts() == nodes);
    REQUIRE(h.stage->resumes() == nodes);
    for (const auto& [line, count] : h.ledger()) REQUIRE(count == 1);
    REQUIRE(h.ledger().size() == static_cast<size_t>(2 * nodes));
    // The waits overlapped far beyond the thread count: held threads would
    // have allowed at most one wait per thread.
    const int pool = kiln::engine::WorkerPool::default_core();
    INFO("threads before " << before << ", peak " << sampler.peak() << ", pool core " << pool << ", started for stalls "
                           << stall_threads << ", peak parked " << h.stage->peak_parked());
    REQUIRE(h.stage->peak_parked() >= 500);
    // The pool, its supervisor and the sampler, and what the supervisor
    // added when a tick saw no task end (a slow journal write under ASan on
    // a busy machine): never a thread per node or per parked wait.
    REQUIRE(sampler.peak() <= before + pool + 2 + stall_threads);
    REQUIRE(sampler.peak() * 10 <= h.stage->peak_parked());
}

TEST_CASE("engine: a parked wait past its stage deadline ends with the stage's timeout error", "[engine][parking]") {
    Harness h(60000);
    auto l = limits(8);
    l.stage_timeouts["t-park"] = 300ms;
    auto fleet = kiln::test::make_fleet(4, 1, {"t-park"}, l);
    auto report = h.run(fleet);
    REQUIRE(report.status == kiln::engine::RunStatus::Failed);
    for (const auto& n : report.nodes) {
        INFO(n.node << ": " << n.error);
        REQUIRE(n.state == kiln::engine::NodeState::Failed);
        REQUIRE(n.detail == "timed_out");
        REQUIRE(n.error.find("t-park: timed out after 300ms (waiting in action wait: the task on " + n.node + ")") !=
                std::string::npos);
    }
    // The stage was never resumed: the deadline ended the wait.
    REQUIRE(h.stage->parks() == 4);
    REQUIRE(h.stage->resumes() == 0);
    auto states = h.store->node_states();
    REQUIRE(states.ok());
    for (const auto& s : *states) REQUIRE(s.state == "failed");
}

TEST_CASE("engine: a soft stop during 1000 parked waits ends them and records where each stopped",
          "[engine][parking][stop]") {
    const int nodes = 1000;
    Harness h(120000);
    auto fleet = kiln::test::make_fleet(nodes, 4, {"t-park"}, limits(nodes));
    // Stop once every node is parked (bounded: a run that never parks them
    // all fails the assertions below instead of hanging).
    std::thread stopper([&] {
        for (int i = 0; i < 6000 && h.stage->parks() < nodes; ++i) std::this_thread::sleep_for(10ms);
        h.stop.request_soft();
    });
    auto report = h.run(fleet);
    stopper.join();
    REQUIRE(h.stage->parks() == nodes);

    REQUIRE(report.status == kiln::engine::RunStatus::Interrupted);
    REQUIRE(report.nodes.size() == static_cast<size_t>(nodes));
    for (const auto& n : report.nodes) {
        INFO(n.node << ": " << n.error);
        REQUIRE(n.state == kiln::engine::NodeState::Pending);
        REQUIRE(n.detail == "interrupted");
        REQUIRE(n.stage == "t-park");
        REQUIRE(n.error.find("stopped while waiting in action wait (the task on " + n.node + "; 0 of 1 done)") !=
                std::string::npos);
    }
    REQUIRE(h.stage->resumes() == 0);
    auto states = h.store->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == static_cast<size_t>(nodes));
    for (const auto& s : *states) {
        REQUIRE(s.state == "pending");
        REQUIRE(s.detail == "interrupted");
        REQUIRE(s.stage == "t-park");
    }
    // Every task was started once; a new run waits for them, starts none again.
    h.stage->set_wait_ms(50);
    StopToken fresh;
    Engine e(fleet, h.registry, h.store.get(), nullptr, fresh);
    auto again = e.run({});
    REQUIRE(again.ok());
    REQUIRE(again->status == kiln::engine::RunStatus::Completed);
    REQUIRE(h.stage->starts() == nodes);
    auto ledger = h.ledger();
    REQUIRE(ledger.size() == static_cast<size_t>(2 * nodes));
    for (const auto& [line, count] : ledger) REQUIRE(count == 1);
}

TEST_CASE("engine: waits that hold their thread still all run, on threads up to parallel", "[engine][parking]") {
    // A stage not converted to parking (block = true) behaves as before:
    // the pool grows past its core for it, so the waits overlap.
    Harness h(300, true);
    const int nodes = 3 * kiln::engine::WorkerPool::default_core();
    auto fleet = kiln::test::make_fleet(nodes, 2, {"t-park"}, limits(nodes));
    auto report = h.run(fleet);
    REQUIRE(report.status == kiln::engine::RunStatus::Completed);
    REQUIRE(h.ledger().size() == static_cast<size_t>(2 * nodes));
}

TEST_CASE("engine: the open-file limit is shared by threads and idle connections", "[engine][parking]") {
    using kiln::engine::kFilesBase;
    using kiln::engine::kFilesPerThread;
    using kiln::engine::plan_open_files;
    // Every plan's descriptors fit the limit: base, threads, idle connections.
    for (long limit : {100L, 300L, 1024L, 20000L, 1L << 20}) {
        for (int in_flight : {1, 10, 200, 5000, 100000}) {
            const auto plan = plan_open_files(limit, in_flight, 6);
            INFO("limit " << limit << " in flight " << in_flight);
            CHECK(plan.threads >= std::min(in_flight, 6));
            CHECK(plan.threads <= in_flight);
            CHECK(plan.idle_connections >= 0);
            CHECK(plan.idle_connections <= kiln::engine::kIdleConnectionsPerNode * in_flight);
            CHECK(plan.idle_connections <= kiln::engine::kIdleConnectionsMax);
            CHECK(kFilesBase + kFilesPerThread * plan.threads + kiln::kFilesPerIdleConnection * plan.idle_connections <=
                  limit);
        }
    }
    // bench/redfish part s: 5,000 BMCs under 20,000 files keep every BMC's connection.
    CHECK(plan_open_files(20000, 5000, 6).idle_connections >= 5000);
    // A tight limit keeps the threads' core and lends the idle connections what is left.
    const auto tight = plan_open_files(kFilesBase + 6 * kFilesPerThread + 3 * kiln::kFilesPerIdleConnection, 1000, 6);
    CHECK(tight.threads == 6);
    CHECK(tight.idle_connections == 3);
    // Not even the core: refused (threads 0).
    CHECK(plan_open_files(kFilesBase + 5 * kFilesPerThread, 1000, 6).threads == 0);
    // No limit: every node in flight.
    CHECK(plan_open_files(-1, 300, 6).threads == 300);

    // A run sets the HTTP pool's budget from its plan.
    kiln::set_idle_connection_budget(-1);
    Harness h(0, false);
    auto report = h.run(kiln::test::make_fleet(4, 1, {"t-park"}, limits(4)));
    REQUIRE(report.status == kiln::engine::RunStatus::Completed);
    CHECK(kiln::idle_connection_budget() > 0);
    kiln::set_idle_connection_budget(kiln::kDefaultIdleConnections);
}

TEST_CASE("engine: the open-file limit bounds the threads, not the nodes in flight", "[engine][parking]") {
    using kiln::engine::plan_open_files;
    using kiln::engine::threads_for_open_files;
    CHECK(threads_for_open_files(300) == (300 - kiln::engine::kFilesBase) / kiln::engine::kFilesPerThread);
    CHECK(threads_for_open_files(kiln::engine::kFilesBase) == 0);
    CHECK(threads_for_open_files(10) == 0);

    // 200 nodes in flight whose stages block (ctx.wait_for grows the pool),
    // under an open-file limit of 300: 59 threads' worth, less what the idle
    // connections are lent (plan_open_files). Before, the run
    // was refused (200 nodes x 4 + 64 files); unbounded, the pool would
    // grow towards 200 threads.
    TempDir dir;
    const int nodes = 200;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 200");
    const auto ledger = dir.file("ledger");
    const std::map<std::string, std::string> env = {
        {"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_ACTIONS", "1"}, {"KILN_TEST_SLEEP_MS", "300"}};
    kiln::test::RunningChild run({"/usr/bin/prlimit", "--nofile=300:300", KILN_TEST_DRIVER, "apply", fleet}, env,
                                 dir.file("apply"));
    int peak = 0;
    while (!run.ended()) {
        peak = std::max(peak, kiln::test::proc_threads(run.pid()));
        std::this_thread::sleep_for(20ms);
    }
    bool timed_out = false;
    auto r = run.wait(300, &timed_out);
    INFO(r.out << r.err << "peak threads " << peak);
    REQUIRE_FALSE(timed_out);
    REQUIRE(r.exit_code == 0);
    // Every node's four stages, one side effect each.
    auto done = LedgerStage::read_ledger(ledger);
    REQUIRE(done.size() == static_cast<size_t>(nodes * 4));
    for (const auto& [line, count] : done) REQUIRE(count == 1);
    // The pool's share, and the run's own few (main, stop watcher, supervisor).
    CHECK(peak > kiln::engine::WorkerPool::default_core());
    const int core = kiln::engine::WorkerPool::default_core();
    CHECK(peak <= plan_open_files(300, nodes, core).threads + 8);

    // A limit that covers not even the pool's core refuses the run before
    // anything is journaled.
    auto refused = kiln::test::run_child({"/usr/bin/prlimit", "--nofile=70:70", KILN_TEST_DRIVER, "apply", fleet}, env);
    INFO(refused.out << refused.err);
    CHECK(refused.exit_code != 0);
    CHECK(refused.err.find("open-file limit (RLIMIT_NOFILE) is 70") != std::string::npos);
    CHECK(refused.err.find("fleet.toml") != std::string::npos);
}
