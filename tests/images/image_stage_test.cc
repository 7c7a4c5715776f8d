#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "images/layer_cache.h"
#include "images/stage/image_config.h"
#include "images/stage/image_stage.h"
#include "tests/images/fakes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln;
using kiln::test::TempDir;
using kiln::test::images::FakeDiskFactory;
using kiln::test::images::FakeDiskWorld;
using kiln::test::images::FakeTools;

namespace {

// A recipe with a base and one layer, one node wanting it, fake tools.
struct StageSetup {
    TempDir dir;
    std::string smoke;
    config::Fleet fleet;
    FakeDiskWorld world;
    std::unique_ptr<images::ImageStage> stage;
    engine::StopToken stop;
    std::unique_ptr<engine::StageContext> ctx;

    StageSetup() {
        dir.write("apt/sources.list.d/d.sources",
                  "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm\nComponents: main\n");
        smoke = dir.write("smoke", "v1");
        dir.write("recipes/r.toml",
                  "name = \"r\"\n[inputs]\nkiln-smoke = \"../smoke\"\n[base]\nsuite = \"bookworm\"\n"
                  "packages = [\"linux-image-amd64\"]\n[[layers]]\nname = \"smoke\"\n[[layers.files]]\n"
                  "path = \"/usr/local/bin/kiln-smoke\"\ninput = \"kiln-smoke\"\n");
        fleet.dir = dir.path();
        images::ImageProfile profile;
        profile.name = "guest";
        profile.recipe = dir.path() + "/recipes/r.toml";
        images::add_image_profile(fleet, profile);
        config::Node node;
        node.name = "n1";
        node.set_profile(images::kImageNodeKey, "guest");
        fleet.nodes.push_back(node);
        images::ImageStageOptions o;
        o.apt_dir = dir.path() + "/apt";
        o.make_runner = [] { return std::make_unique<FakeTools>(); };
        o.make_disks = [this] { return std::make_unique<FakeDiskFactory>(world); };
        stage = std::make_unique<images::ImageStage>(o);
        ctx = std::make_unique<engine::StageContext>(fleet, fleet.nodes[0], "image", stop,
                                                     engine::StageContext::Clock::now() + std::chrono::minutes(5),
                                                     nullptr, nullptr);
    }
};

}  // namespace

TEST_CASE("image stage: plans a build, then converges: a changed input replans: verify checks the bytes") {
    StageSetup setup;
    TempDir& dir = setup.dir;
    const std::string& smoke = setup.smoke;
    images::ImageStage& stage = *setup.stage;
    engine::StageContext& ctx = *setup.ctx;

    auto obs = stage.observe(ctx);
    REQUIRE(obs.ok());
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan.ok());
    REQUIRE(plan->size() == 1);
    CHECK(plan->at(0).description == "build image r (2 layers to build, 0 cached)");
    CHECK_FALSE(stage.verify(ctx).ok());
    REQUIRE(stage.apply(ctx, plan->at(0)).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(fs::exists(dir.path() + "/.kiln/images/images/r.qcow2"));

    auto obs2 = stage.observe(ctx);
    REQUIRE(obs2.ok());
    CHECK(stage.plan(ctx, *obs2)->empty());

    auto in1 = stage.inputs(ctx);
    std::ofstream(smoke) << "v2";
    auto in2 = stage.inputs(ctx);
    REQUIRE(in1.ok());
    REQUIRE(in2.ok());
    CHECK((*in1)["final_key"] != (*in2)["final_key"]);
    auto obs3 = stage.observe(ctx);
    auto plan3 = stage.plan(ctx, *obs3);
    REQUIRE(plan3->size() == 1);
    CHECK(plan3->at(0).description == "build image r (1 layers to build, 1 cached)");
    CHECK_FALSE(stage.verify(ctx).ok());

    // Bytes changed behind kiln's back: verify says so.
    REQUIRE(stage.apply(ctx, plan3->at(0)).ok());
    REQUIRE(stage.verify(ctx).ok());
    std::ofstream(dir.path() + "/.kiln/images/images/r.qcow2", std::ios::app) << "tampered";
    auto v = stage.verify(ctx);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().message.find("differs from its manifest") != std::string::npos);
}

TEST_CASE("image stage: through the engine a node parks while another build holds a layer, then finds it cached") {
    StageSetup setup;
    images::ImageStage& stage = *setup.stage;
    engine::StageContext& ctx = *setup.ctx;
    ctx.set_can_park(true);
    auto obs = stage.observe(ctx);
    REQUIRE(obs.ok());
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan.ok());
    REQUIRE(plan->size() == 1);
    const std::string base_key = obs->state["layers"][0]["key"];

    // Another build (another node, another kiln on this cache) holds the base.
    images::LayerCache other(setup.dir.path() + "/.kiln/images");
    REQUIRE(other.open().ok());
    auto held = other.lock(base_key);
    REQUIRE(held.ok());
    REQUIRE(held->held());
    auto parked = stage.apply(ctx, plan->at(0));
    REQUIRE_FALSE(parked.ok());
    auto req = ctx.take_park();
    REQUIRE(req);  // parked, not failed and not blocked on the lock
    CHECK(req->reason.find("layer base " + base_key + " is being built by another build") != std::string::npos);
    CHECK(req->key == "image-build-ended");
    CHECK_FALSE(stage.verify(ctx).ok());

    // The other build lets go: the resumed apply builds (or finds) every layer.
    *held = images::KeyLock{};
    REQUIRE(stage.apply(ctx, plan->at(0)).ok());
    CHECK_FALSE(ctx.take_park());
    REQUIRE(stage.verify(ctx).ok());
}
