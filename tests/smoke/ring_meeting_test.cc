// Shared smoke rings meet parked (issue 20): a node waiting for the rest
// of its ring holds no thread, so a ring far larger than the engine's pool
// meets on a pool sized to the cores.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <map>
#include <mutex>

#include "pipelines/smoke/stage/ring_meeting.h"
#include "provisioner/engine/engine.h"
#include "provisioner/engine/worker_pool.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/proc_status.h"
#include "tests/support/temp_dir.h"

namespace {

using kiln::engine::StageContext;

// A stage whose one action is the smoke stage's meeting: every node of the
// fleet is one ring. Records who each node met, and how often it parked.
class MeetingStage : public kiln::engine::Stage {
public:
    explicit MeetingStage(std::vector<std::string> ring) : ring_(std::move(ring)) {}
    std::string name() const override { return "meet"; }
    kiln::Result<kiln::engine::Observation> observe(StageContext&) override { return kiln::engine::Observation{}; }
    kiln::Result<std::vector<kiln::engine::Action>> plan(StageContext&, const kiln::engine::Observation&) override {
        return std::vector<kiln::engine::Action>{{"meet:ring", "meet the ring"}};
    }
    kiln::Status apply(StageContext& ctx, const kiln::engine::Action&) override {
        REQUIRE(ctx.can_park());
        std::string waiting;
        auto met = meeting_.arrive(ctx, ring_, &waiting);
        if (!met) return met.error();
        std::lock_guard<std::mutex> lock(mu_);
        if (!*met) {
            ++parks_;
            return ctx.park_for(std::chrono::seconds(1), nlohmann::json::object(), "the ring (missing " + waiting + ")",
                                kiln::smoke::RingMeeting::wake_key(ring_));
        }
        met_[ctx.node().name] = **met;
        return kiln::ok_status();
    }
    kiln::Status verify(StageContext&) override { return kiln::ok_status(); }

    std::map<std::string, std::vector<std::string>> met() const {
        std::lock_guard<std::mutex> lock(mu_);
        return met_;
    }
    int parks() const {
        std::lock_guard<std::mutex> lock(mu_);
        return parks_;
    }

private:
    std::vector<std::string> ring_;
    kiln::smoke::RingMeeting meeting_;
    mutable std::mutex mu_;
    std::map<std::string, std::vector<std::string>> met_;
    int parks_ = 0;
};

}  // namespace

TEST_CASE("a ring of 400 nodes meets parked on a pool bounded by the cores, each node with all 400") {
    const int nodes = 400;
    kiln::config::Limits limits;
    limits.parallel = nodes;
    auto fleet = kiln::test::make_fleet(nodes, 1, {"meet"}, limits);
    std::vector<std::string> ring;
    for (const auto& n : fleet.nodes) ring.push_back(n.name);
    kiln::test::TempDir dir;
    auto store = kiln::journal::open_sqlite_store(dir.file("journal.db"), {});
    REQUIRE(store.ok());
    kiln::engine::StageRegistry registry;
    auto stage = std::make_shared<MeetingStage>(ring);
    registry.add(stage);
    kiln::engine::StopToken stop;
    const int before = kiln::test::proc_threads(::getpid());
    kiln::test::ThreadSampler sampler;
    kiln::engine::Engine engine(fleet, registry, store->get(), nullptr, stop);
    kiln::engine::RunOptions opts;
    opts.seed = 1;
    auto report = engine.run(opts);
    sampler.stop();
    REQUIRE(report.ok());
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);
    auto met = stage->met();
    REQUIRE(met.size() == static_cast<size_t>(nodes));
    for (const auto& [node, members] : met) {
        INFO(node);
        REQUIRE(members == ring);
    }
    // All but the last to arrive waited, parked: held waits would have
    // needed a thread each (the blocking meeting grows the pool per wait).
    const int pool = kiln::engine::WorkerPool::default_core();
    INFO("threads before " << before << ", peak " << sampler.peak() << ", pool core " << pool << ", parks "
                           << stage->parks());
    REQUIRE(stage->parks() >= nodes - 1);
    REQUIRE(sampler.peak() <= before + pool + 2);
}
