// Issue 14 item 3 (part): a BMC that fronts several systems (DMTF's
// public-bladed: one enclosure BMC, four blades). A node names its system
// (bmc.system); inventory, plan and verify read that system, and firmware
// members related to another system are not the node's.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "firmware/stage/component_match.h"
#include "provisioner/core/command.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::firmware;
using namespace kiln::firmware::test;
using kiln::bmc::test::BmcChild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kBlade0 = "/redfish/v1/Systems/529QB9450R6";
const std::string kBlade2 = "/redfish/v1/Systems/529QB9452R6";

std::string bios_component(const std::string& version) {
    return "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"" + version +
           "\"\nartifact = \"/nonexistent/bios.bin\"\nsha256 = \"" + std::string(64, 'b') + "\"\n";
}

}  // namespace

TEST_CASE("members related to another system are not this node's") {
    BmcInventory inv;
    inv.system_uri = kBlade2;
    inv.components.push_back({"BIOS_0", "BIOS", "1.0", "/fi/BIOS_0", "inventory", {kBlade0}});
    inv.components.push_back({"BIOS_2", "BIOS", "2.0", "/fi/BIOS_2", "inventory", {kBlade2}});
    inv.components.push_back({"CPLD", "BIOS", "3.0", "/fi/CPLD", "inventory", {"/redfish/v1/Chassis/Enclosure"}});
    auto m = matched_members(inv, {"BIOS", "", ""});
    REQUIRE(m.size() == 2);
    CHECK(m[0].id == "BIOS_2");
    CHECK(m[1].id == "CPLD");  // related to no system: shared, kept
    // A system whose path is a prefix of another's is not that one.
    inv.system_uri = "/redfish/v1/Systems/529QB9450R";
    CHECK(matched_members(inv, {"BIOS", "", ""}).size() == 1);
}

TEST_CASE("nodes on one blade enclosure BMC each read their own system") {
    kiln::test::TempDir dir;
    const std::string tree = dir.file("bladed");
    fs::copy(std::string(KILN_FIXTURE_REDFISH) + "/dmtf-public-bladed", tree, fs::copy_options::recursive);
    // Blade 2 runs a newer BIOS than the others (the capture has one version
    // on all four; this makes the systems tell apart).
    const std::string sys = tree + "/Systems/529QB9452R6/index.json";
    json s = json::parse(std::ifstream(sys));
    REQUIRE(s["BiosVersion"] == "P86 v1.58 (10/15/2015)");
    s["BiosVersion"] = "P86 v1.60 (03/01/2016)";
    std::ofstream(sys) << s.dump(2);

    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", tree, "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    // node-0 names blade 0 and wants 1.58; node-1 names blade 2 and wants
    // 1.60: both converged only when each reads its own system.
    kiln::test::TempDir d0, d1;
    const std::string f0 = write_fleet(
        d0, {.bmc_urls = {bmc.url()}, .firmware_toml = bios_component("P86 v1.58"), .bmc_systems = {kBlade0}});
    const std::string f1 = write_fleet(
        d1, {.bmc_urls = {bmc.url()}, .firmware_toml = bios_component("P86 v1.60"), .bmc_systems = {kBlade2}});
    for (const auto& [fleet, system, bios] : {std::tuple{f0, kBlade0, std::string("P86 v1.58 (10/15/2015)")},
                                              std::tuple{f1, kBlade2, std::string("P86 v1.60 (03/01/2016)")}}) {
        auto inv = run_kiln({"firmware", "inventory", fleet, "--json"});
        INFO(inv.out << inv.err);
        REQUIRE(inv.exit_code == 0);
        auto j = json::parse(inv.out);
        CHECK(j["nodes"][0]["system"] == system);
        CHECK(j["nodes"][0]["bios_version"] == bios);
        auto plan = run_kiln({"plan", fleet, "--stage", "firmware"});
        INFO(plan.out << plan.err);
        CHECK(plan.exit_code == 0);
        CHECK(plan.out.find("(0 actions), 0 converged, 0 errors") != std::string::npos);
    }

    // A system the BMC does not list: the node fails naming it and the members.
    kiln::test::TempDir d2;
    const std::string bad = write_fleet(d2, {.bmc_urls = {bmc.url()},
                                             .firmware_toml = bios_component("P86 v1.58"),
                                             .bmc_systems = {"/redfish/v1/Systems/Blade9"}});
    auto plan = run_kiln({"plan", bad, "--stage", "firmware"});
    INFO(plan.out << plan.err);
    CHECK(plan.exit_code == 1);
    CHECK((plan.out + plan.err).find("the node's system /redfish/v1/Systems/Blade9 is not a member") !=
          std::string::npos);
}
