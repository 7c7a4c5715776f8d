// Issue 14 item 2: components are sets. A profile component applies to
// every inventory member with its name (or fitting its `match` glob, or
// related to its `related_item`); plan counts the members off the version,
// apply targets each of them, verify wants all of them at the version.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "firmware/stage/component_match.h"
#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/command.h"
#include "provisioner/core/sha256.h"
#include "provisioner/net/http_client.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::firmware;
using namespace kiln::firmware::test;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::mockup_path;
using nlohmann::json;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

FirmwareItem item(const std::string& id, const std::string& name, const std::string& version,
                  std::vector<std::string> related = {}) {
    return {id, name, version, "/redfish/v1/UpdateService/FirmwareInventory/" + id, "inventory", std::move(related)};
}

BmcInventory eight_gpus(int at_new) {
    BmcInventory inv;
    inv.system_uri = "/redfish/v1/Systems/1";
    inv.components.push_back(item("BIOS", "System BIOS", "1.0", {"/redfish/v1/Systems/1"}));
    for (int i = 1; i <= 8; ++i)
        inv.components.push_back(item("GPU_SXM_" + std::to_string(i), "GPU SXM Firmware",
                                      i <= at_new ? "92.00.20.00.01" : "92.00.19.00.11"));
    return inv;
}

}  // namespace

TEST_CASE("glob patterns match Ids and Names case-insensitively") {
    CHECK(glob_match("GPU_SXM_*", "gpu_sxm_3"));
    CHECK(glob_match("*SXM?", "HGX_FW_GPU_SXM5"));
    CHECK(glob_match("*", ""));
    CHECK_FALSE(glob_match("GPU_SXM_?", "GPU_SXM_10"));
    CHECK_FALSE(glob_match("GPU*", "NVSwitch_0"));
    CHECK(glob_match("a*b*c", "a-x-b-y-c"));
    CHECK_FALSE(glob_match("a*b*c", "a-x-c-y-b"));
}

TEST_CASE("a component is every member with its name, or its pattern, or related to its item") {
    auto inv = eight_gpus(3);
    CHECK(matched_members(inv, {"GPU SXM Firmware", "", ""}).size() == 8);
    CHECK(matched_members(inv, {"GPU", "GPU_SXM_*", ""}).size() == 8);
    CHECK(matched_members(inv, {"GPU", "GPU_SXM_1", ""}).size() == 1);
    CHECK(matched_members(inv, {"gpu_sxm_4", "", ""}).size() == 1);
    // BIOS: the member by Id; with related_item only the system's own.
    CHECK(matched_members(inv, {"BIOS", "", "/redfish/v1/Systems/1"}).size() == 1);
    CHECK(matched_members(inv, {"BIOS", "", "/redfish/v1/Systems/2"}).empty());
    CHECK(matched_members(inv, {"BIOS", "", "/redfish/v1/Systems/1"}).front().id == "BIOS");
    // A prefix is a path prefix, not a string one.
    CHECK(matched_members(inv, {"BIOS", "", "/redfish/v1/Systems/"}).size() == 1);
    BmcInventory two = inv;
    two.components[0].related = {"/redfish/v1/Systems/10"};
    CHECK(matched_members(two, {"BIOS", "", "/redfish/v1/Systems/1"}).empty());

    auto st = component_state(inv, {"GPU SXM Firmware", "", ""}, "92.00.20.00.01");
    CHECK(st.members.size() == 8);
    REQUIRE(st.off.size() == 5);
    CHECK(st.off.front().id == "GPU_SXM_4");
    CHECK(st.counts == "5 of 8 at 92.00.19.00.11, 3 at 92.00.20.00.01");
    // Normalised: a member written "92.0.20.0.1" is at the version.
    inv.components[4].version = "92.0.20.0.1";
    CHECK(component_state(inv, {"GPU SXM Firmware", "", ""}, "92.00.20.00.01").off.size() == 4);
}

// ---- kiln-bmc with eight GPU firmware members ------------------------------

namespace {

FirmwareStageOptions fast_options() {
    FirmwareStageOptions o;
    o.task_poll = milliseconds(20);
    o.settle_poll = milliseconds(20);
    o.settle_timeout = milliseconds(5000);
    o.task_timeout = milliseconds(5000);
    return o;
}

// DMTF's rack-mount tree with eight GPU firmware members added: one Name for
// all eight (as HPE's Apollo iLO lists its GPUs), Ids GPU_SXM_1..8 (as
// NVIDIA HGX baseboards number theirs); `at_new` of them already at the new
// version. No RelatedItem: kiln-bmc would take a link under Systems for a
// BIOS. Inferred from those vendors' published trees, not captured.
}  // namespace

TEST_CASE("eight GPU members: plan counts them, apply flashes the five off exactly once, verify wants all eight") {
    kiln::test::TempDir dir;
    const std::string tree = gpu_tree(dir, 3);
    BmcChild bmc;
    REQUIRE(
        bmc.start({"--mockup", tree, "--port", "0", "--task-seconds", "0.2"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    // By name (one Name for all eight), or by pattern: the same set.
    const bool by_pattern = GENERATE(false, true);
    INFO((by_pattern ? "by pattern" : "by name"));
    const std::string fleet_path =
        write_fleet(dir, {.bmc_urls = {bmc.url()},
                          .firmware_toml = by_pattern ? gpu_component(dir, "GPU", "GPU_SXM_*")
                                                      : gpu_component(dir, "GPU SXM Firmware", "")});

    kiln::CommandSpec spec;
    spec.argv = {KILN_BINARY, "plan", fleet_path, "--stage", "firmware"};
    spec.env = {{"KILN_FW_TEST_PASSWORD", kBmcPassword}};
    auto plan = kiln::ProcessRunner().run(spec);
    REQUIRE(plan);
    INFO(plan->out << plan->err);
    CHECK(plan->out.find("on 5 of 8 members to 92.00.20.00.01 (5 of 8 at 92.00.19.00.11, 3 at 92.00.20.00.01; to "
                         "update: GPU_SXM_4, GPU_SXM_5, GPU_SXM_6, GPU_SXM_7, GPU_SXM_8)") != std::string::npos);

    auto fleet = load_fleet_or_fail(fleet_path);
    FirmwareStage stage(nullptr, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    CHECK(run.actions == std::vector<std::string>{"flash:" + std::string(by_pattern ? "GPU" : "GPU SXM Firmware") +
                                                  ":92.00.20.00.01"});
    auto updates = bmc_get(bmc.url(), "/kiln-bmc/state")["updates"];
    REQUIRE(updates.size() == 1);
    std::vector<std::string> targets = updates[0]["targets"].get<std::vector<std::string>>();
    std::sort(targets.begin(), targets.end());
    std::vector<std::string> want;
    for (int i = 4; i <= 8; ++i)
        want.push_back("/redfish/v1/UpdateService/FirmwareInventory/GPU_SXM_" + std::to_string(i));
    CHECK(targets == want);  // the three already there were not flashed again

    // Every member now at the version; a second run does nothing.
    auto again = run_stage(stage, fleet, fleet.nodes[0]);
    CHECK_FALSE(again.error);
    CHECK(again.actions.empty());
    CHECK(bmc_get(bmc.url(), "/kiln-bmc/state")["updates"].size() == 1);
}

TEST_CASE("verify fails while one of eight GPU members is off the version, naming it and the counts") {
    kiln::test::TempDir dir;
    const std::string tree = gpu_tree(dir, 7);
    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", tree, "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    auto fleet = load_fleet_or_fail(
        write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = gpu_component(dir, "GPU SXM Firmware", "")}));
    FirmwareStage stage(nullptr, fast_options());
    engine::StopToken stop;
    engine::StageContext ctx(
        fleet, fleet.nodes[0], "firmware", stop, engine::StageContext::Clock::now() + std::chrono::minutes(1),
        [](const std::string&, int) {}, [](const std::string&, const std::string&) {});
    auto v = stage.verify(ctx);
    REQUIRE_FALSE(v);
    CHECK(v.error().code == "firmware.verify");
    CHECK(v.error().message ==
          "GPU SXM Firmware: 7 of 8 at 92.00.20.00.01, 1 at 92.00.19.00.11; the profile wants all 8 at "
          "92.00.20.00.01 (off: GPU_SXM_8)");
}
