// The text each shipped stage hashes for fleets that set every hashed key,
// against a pinned copy (tests/fixtures/stage_inputs/golden.json). A node's
// input hash is journaled: if a stage's inputs changed by one byte for an
// unchanged fleet, every converged node would plan its stages again after
// the upgrade. Inputs may move between files (each stage states its own);
// these bytes may not.
//
// A change that means to alter a stage's inputs regenerates the copy with
// KILN_WRITE_STAGE_INPUTS=PATH and says so in its commit.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "provisioner/cli/product_stages.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/stage_registry.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = fs::path(KILN_SOURCE_DIR).lexically_normal().string();
const std::string kGolden = KILN_TEST_FIXTURES "/stage_inputs/golden.json";

// The fleets pinned, relative to the source tree.
const std::vector<std::string> kFleets = {
    "tests/fixtures/stage_inputs/every_input.toml",
    "tests/fixtures/config/full.toml",
    "examples/lab/fleet.toml",
};

// Absolute paths (artifacts, recipes, keys) resolve against the checkout:
// the pinned copy names the source tree @SRC@.
std::string portable(std::string text) {
    for (size_t at = text.find(kSource); at != std::string::npos; at = text.find(kSource, at))
        text.replace(at, kSource.size(), "@SRC@");
    return text;
}

// Every node's pipeline stages and the text each one hashes.
json actual_inputs(const kiln::engine::StageRegistry& registry) {
    json all = json::object();
    for (const auto& rel : kFleets) {
        kiln::config::LoadOptions o = registry.load_options();
        o.default_pipelines_dir = kSource + "/pipelines";
        auto r = kiln::config::load_fleet(kSource + "/" + rel, o);
        INFO(rel << (r.errors.empty() ? "" : ": " + r.errors.front().str()));
        REQUIRE(r.fleet);
        const auto& fleet = *r.fleet;
        kiln::engine::StopToken stop;
        for (const auto& node : fleet.nodes) {
            const auto& pipeline = fleet.pipelines.at(node.role);
            for (const auto& stage_name : pipeline.stages) {
                const kiln::engine::Stage* stage = registry.find(stage_name);
                INFO(rel << " " << node.name << " " << stage_name);
                REQUIRE(stage != nullptr);
                kiln::engine::StageContext ctx(fleet, node, stage_name, stop,
                                               kiln::engine::StageContext::Clock::time_point::max(), nullptr, nullptr);
                auto text = stage->input_text(ctx);
                REQUIRE(text);
                json parsed = json::parse(*text);
                // Must be the canonical dump: the engine hashes this text.
                CHECK(parsed.dump() == *text);
                if (stage_name == "image") {
                    // The image stage adds its recipe's final layer key,
                    // which covers the recipe's files and this machine's
                    // package mirror: not the config's, so not pinned.
                    REQUIRE(parsed.contains("final_key"));
                    CHECK(parsed["final_key"].get<std::string>().size() == 64);
                    parsed.erase("final_key");
                }
                all[rel][node.name][stage_name] = json::parse(portable(parsed.dump()));
            }
        }
    }
    return all;
}

}  // namespace

TEST_CASE("stage inputs: every shipped stage hashes the same bytes for an unchanged fleet", "[engine][inputs]") {
    kiln::engine::StageRegistry registry;
    kiln::engine::register_product_stages(registry);
    const json actual = actual_inputs(registry);

    if (const char* out = std::getenv("KILN_WRITE_STAGE_INPUTS")) {
        std::ofstream(out) << actual.dump(2) << "\n";
        WARN("wrote " << out);
    }
    std::ifstream in(kGolden);
    REQUIRE(in);
    const json golden = json::parse(in);

    // Per fleet, node and stage, so that a failure names the one that moved.
    for (const auto& [fleet, nodes] : golden.items()) {
        REQUIRE(actual.contains(fleet));
        for (const auto& [node, stages] : nodes.items()) {
            REQUIRE(actual[fleet].contains(node));
            for (const auto& [stage, text] : stages.items()) {
                INFO(fleet << " " << node << " " << stage);
                REQUIRE(actual[fleet][node].contains(stage));
                CHECK(actual[fleet][node][stage].dump() == text.dump());
            }
            CHECK(actual[fleet][node].size() == stages.size());
        }
        CHECK(actual[fleet].size() == nodes.size());
    }
    CHECK(actual.size() == golden.size());
}
