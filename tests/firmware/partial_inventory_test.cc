// Issue 14 item 1: reads that degrade, not fail. An optional part of the
// inventory that cannot be read (a 404 NetworkAdapters link, a collection
// without Members, a Bios without Attributes, an empty FirmwareInventory)
// becomes a named warning; the node fails only when its profile needs that
// part. Scripted BMCs for the shapes, then kiln-bmc serving DMTF's public
// trees (tests/fixtures/redfish) through the `kiln` CLI.
#include <catch2/catch.hpp>

#include <filesystem>

#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/command.h"
#include "provisioner/core/sha256.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/fake_bmc.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::firmware;
using namespace kiln::firmware::test;
using kiln::bmc::test::BmcChild;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

redfish::Endpoint endpoint() {
    return redfish::Endpoint{"http://bmc.test:8000", "admin", "s3cret-pw", {}};
}

// minimal_tree() plus a chassis whose NetworkAdapters link is `adapters`
// (its collection and members are up to the test).
void with_chassis(FakeBmc& bmc, const std::string& adapters = "/redfish/v1/Chassis/C1/NetworkAdapters") {
    bmc.on("GET", "/redfish/v1/",
           json_reply({{"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                       {"Managers", {{"@odata.id", "/redfish/v1/Managers"}}},
                       {"Chassis", {{"@odata.id", "/redfish/v1/Chassis"}}},
                       {"UpdateService", {{"@odata.id", "/redfish/v1/UpdateService"}}},
                       {"Links", {{"Sessions", {{"@odata.id", "/redfish/v1/SessionService/Sessions"}}}}}}));
    bmc.on("GET", "/redfish/v1/Chassis", json_reply({{"Members", {{{"@odata.id", "/redfish/v1/Chassis/C1"}}}}}));
    bmc.on("GET", "/redfish/v1/Chassis/C1", json_reply({{"Id", "C1"}, {"NetworkAdapters", {{"@odata.id", adapters}}}}));
}

Result<BmcInventory> inventory(FakeBmc& bmc, const InventoryOptions& opts = {}) {
    redfish::Client c(std::make_shared<redfish::BmcSession>(bmc, endpoint()));
    return read_inventory(c, opts);
}

const FirmwareItem* component(const BmcInventory& inv, const std::string& id) {
    for (const auto& c : inv.components)
        if (c.id == id) return &c;
    return nullptr;
}

std::string fixture(const std::string& tree) {
    return std::string(KILN_FIXTURE_REDFISH) + "/" + tree;
}

engine::Observation observe_or_fail(engine::Stage& stage, const config::Fleet& fleet, const config::Node& node) {
    engine::StopToken stop;
    engine::StageContext ctx(
        fleet, node, stage.name(), stop, engine::StageContext::Clock::now() + std::chrono::minutes(1),
        [](const std::string&, int) {}, [](const std::string&, const std::string&) {});
    auto obs = stage.observe(ctx);
    INFO((obs ? std::string("ok") : obs.error().str()));
    REQUIRE(obs);
    return *obs;
}

std::string component_toml(const std::string& name, const std::string& version) {
    return "[[firmware.p.components]]\nname = \"" + name + "\"\nversion = \"" + version +
           "\"\nartifact = \"/nonexistent/" + name + ".bin\"\nsha256 = \"" + std::string(64, 'a') + "\"\n";
}

}  // namespace

TEST_CASE("a NetworkAdapters link that answers 404 is a named warning and the rest of the inventory stands") {
    FakeBmc bmc;
    bmc.minimal_tree("1.0", "2.0");
    with_chassis(bmc);
    auto inv = inventory(bmc);
    REQUIRE(inv);
    REQUIRE(inv->warnings.size() == 1);
    CHECK(inv->warnings[0].part == "network_adapters");
    CHECK(inv->warnings[0].message.find("GET /redfish/v1/Chassis/C1/NetworkAdapters: HTTP 404") == 0);
    CHECK_FALSE(inv->warnings[0].transient);
    CHECK(component(*inv, "BIOS"));
    CHECK(inv->bmc_version == "2.0");
    CHECK(inv->to_json()["warnings"][0]["part"] == "network_adapters");
}

TEST_CASE("a NetworkAdapters collection without Members and an adapter that fails are warnings each") {
    FakeBmc bmc;
    bmc.minimal_tree();
    with_chassis(bmc);
    SECTION("no Members") {
        bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters", json_reply({{"Name", "adapters"}}));
        auto inv = inventory(bmc);
        REQUIRE(inv);
        REQUIRE(inv->warnings.size() == 1);
        CHECK(inv->warnings[0].message == "GET /redfish/v1/Chassis/C1/NetworkAdapters: /Members: missing");
    }
    SECTION("one adapter of two answers 503, the other is read") {
        bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters",
               json_reply({{"Members",
                            {{{"@odata.id", "/redfish/v1/Chassis/C1/NetworkAdapters/A"}},
                             {{"@odata.id", "/redfish/v1/Chassis/C1/NetworkAdapters/B"}}}}}));
        bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters/A", Reply{503, "", {}, ""});
        bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters/B",
               json_reply({{"Id", "B"}, {"Name", "NIC B"}, {"Controllers", {{{"FirmwarePackageVersion", "8.11.0"}}}}}));
        auto inv = inventory(bmc);
        REQUIRE(inv);
        REQUIRE(inv->warnings.size() == 1);
        CHECK(inv->warnings[0].transient);
        CHECK(inv->warnings[0].message.find("NetworkAdapters/A") != std::string::npos);
        REQUIRE(component(*inv, "B"));
        CHECK(component(*inv, "B")->version == "8.11.0");
    }
}

TEST_CASE("a Bios without Attributes is a bios warning and no Bios is read without asking") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on("GET", "/redfish/v1/Systems/S1",
           json_reply({{"BiosVersion", "1.0"}, {"Bios", {{"@odata.id", "/redfish/v1/Systems/S1/Bios"}}}}));
    bmc.on("GET", "/redfish/v1/Systems/S1/Bios", json_reply({{"Id", "Bios"}, {"AttributeRegistry", "x"}}));
    auto inv = inventory(bmc);
    REQUIRE(inv);
    CHECK_FALSE(inv->bios);
    REQUIRE(inv->warnings.size() == 1);
    CHECK(inv->warnings[0].str() == "bios: GET /redfish/v1/Systems/S1/Bios: /Attributes: missing");

    int before = bmc.count("GET", "/redfish/v1/Systems/S1/Bios");
    auto light = inventory(bmc, {.bios = false});
    REQUIRE(light);
    CHECK(light->warnings.empty());
    CHECK(bmc.count("GET", "/redfish/v1/Systems/S1/Bios") == before);
}

TEST_CASE("firmware listed only in SoftwareInventory is found and merged without duplicates") {
    FakeBmc bmc;
    bmc.minimal_tree("1.0", "2.0");
    bmc.on("GET", "/redfish/v1/UpdateService",
           json_reply({{"FirmwareInventory", {{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory"}}},
                       {"SoftwareInventory", {{"@odata.id", "/redfish/v1/UpdateService/SoftwareInventory"}}}}));
    bmc.on("GET", "/redfish/v1/UpdateService/SoftwareInventory",
           json_reply({{"Members",
                        {{{"@odata.id", "/redfish/v1/UpdateService/SoftwareInventory/bios_active"}},
                         {{"@odata.id", "/redfish/v1/UpdateService/SoftwareInventory/ME"}}}}}));
    bmc.on("GET", "/redfish/v1/UpdateService/SoftwareInventory/bios_active",
           json_reply({{"Id", "bios_active"}, {"Name", "System BIOS"}, {"Version", "1.0"}}));
    bmc.on("GET", "/redfish/v1/UpdateService/SoftwareInventory/ME",
           json_reply({{"Id", "ME"}, {"Name", "Intel ME"}, {"Version", "04.04.04.053"}}));

    SECTION("an empty FirmwareInventory (Intel)") {
        bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory", json_reply({{"Members", json::array()}}));
        auto inv = inventory(bmc);
        REQUIRE(inv);
        CHECK(inv->warnings.empty());
        REQUIRE(component(*inv, "ME"));
        CHECK(component(*inv, "ME")->source == "software_inventory");
        CHECK(component(*inv, "bios_active"));
        CHECK(find_component(*inv, "Intel ME"));
    }
    SECTION("a FirmwareInventory that answers 404") {
        bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory", Reply{404, "", {}, ""});
        auto inv = inventory(bmc);
        REQUIRE(inv);
        REQUIRE(inv->warnings.size() == 1);
        CHECK(inv->warnings[0].part == "firmware_inventory");
        CHECK(component(*inv, "ME"));
    }
    SECTION("the same device in both collections is listed once") {
        // minimal_tree's FirmwareInventory has BIOS "System BIOS" 1.0: the
        // SoftwareInventory's bios_active is the same device and version.
        auto inv = inventory(bmc);
        REQUIRE(inv);
        int bios = 0;
        for (const auto& c : inv->components) bios += c.name == "System BIOS";
        CHECK(bios == 1);
        CHECK(component(*inv, "ME"));
    }
}

TEST_CASE("a NIC seen in FirmwareInventory and under NetworkAdapters is one component when versions agree") {
    FakeBmc bmc;
    bmc.minimal_tree();
    with_chassis(bmc);
    bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory",
           json_reply({{"Members",
                        {{{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory/BIOS"}},
                         {{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory/NIC1"}}}}}));
    bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory/NIC1",
           json_reply({{"Id", "NIC1"}, {"Name", "ConnectX-6 Dx"}, {"Version", "22.31.1014"}}));
    bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters",
           json_reply({{"Members",
                        {{{"@odata.id", "/redfish/v1/Chassis/C1/NetworkAdapters/NIC1"}},
                         {{"@odata.id", "/redfish/v1/Chassis/C1/NetworkAdapters/NIC2"}}}}}));
    // The same adapter with its version zero-padded; a second adapter.
    bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters/NIC1",
           json_reply({{"Id", "NIC1"},
                       {"Name", "ConnectX-6 Dx"},
                       {"Controllers", {{{"FirmwarePackageVersion", "22.031.01014"}}}}}));
    bmc.on("GET", "/redfish/v1/Chassis/C1/NetworkAdapters/NIC2",
           json_reply({{"Id", "NIC2"},
                       {"Name", "ConnectX-6 Dx"},
                       {"Controllers", {{{"FirmwarePackageVersion", "22.30.1004"}}}}}));
    auto inv = inventory(bmc);
    REQUIRE(inv);
    CHECK(inv->warnings.empty());
    int nics = 0;
    for (const auto& c : inv->components) nics += c.name == "ConnectX-6 Dx";
    CHECK(nics == 2);
    REQUIRE(component(*inv, "NIC1"));
    CHECK(component(*inv, "NIC1")->source == "inventory");  // the updatable one is kept
    CHECK(component(*inv, "NIC2"));
}

TEST_CASE("the stage fails a node only when its profile needs the part that was not read") {
    kiln::test::TempDir dir;
    FakeBmc bmc;
    bmc.minimal_tree("1.0", "1.0");
    with_chassis(bmc);  // NetworkAdapters: 404
    auto http = std::shared_ptr<net::HttpClient>(&bmc, [](net::HttpClient*) {});

    SECTION("a profile that needs only the BIOS converges, with the warning as a note") {
        auto fleet =
            load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"},
                                                 .firmware_toml = "[firmware.p]\n" + component_toml("BIOS", "1.0")}));
        FirmwareStage stage(http);
        auto obs = observe_or_fail(stage, fleet, fleet.nodes[0]);
        REQUIRE(obs.notes.size() == 1);
        CHECK(
            obs.notes[0].find("inventory part not read: network_adapters: GET /redfish/v1/Chassis/C1/NetworkAdapters: "
                              "HTTP 404") == 0);
        auto run = run_stage(stage, fleet, fleet.nodes[0]);
        INFO((run.error ? run.error->str() : std::string("ok")));
        CHECK_FALSE(run.error);
        CHECK(run.actions.empty());
    }
    SECTION("a profile that needs a NIC fails naming the NIC and the part not read") {
        auto fleet = load_fleet_or_fail(
            write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"},
                              .firmware_toml = "[firmware.p]\n" + component_toml("NIC1", "22.31.1014")}));
        FirmwareStage stage(http);
        auto run = run_stage(stage, fleet, fleet.nodes[0]);
        REQUIRE(run.error);
        CHECK(run.error->code == "firmware.component");
        CHECK(run.error->message.find("component 'NIC1'") != std::string::npos);
        CHECK(run.error->message.find(
                  "not read: network_adapters: GET /redfish/v1/Chassis/C1/NetworkAdapters: HTTP 404") !=
              std::string::npos);
    }
    SECTION("no BIOS read when the node has no BIOS profile") {
        bmc.on("GET", "/redfish/v1/Systems/S1",
               json_reply({{"BiosVersion", "1.0"}, {"Bios", {{"@odata.id", "/redfish/v1/Systems/S1/Bios"}}}}));
        bmc.on("GET", "/redfish/v1/Systems/S1/Bios", json_reply({{"Attributes", {{"SriovGlobalEnable", "Enabled"}}}}));
        auto fleet =
            load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"},
                                                 .firmware_toml = "[firmware.p]\n" + component_toml("BIOS", "1.0")}));
        FirmwareStage stage(http);
        auto run = run_stage(stage, fleet, fleet.nodes[0]);
        CHECK_FALSE(run.error);
        CHECK(bmc.count("GET", "/redfish/v1/Systems/S1/Bios") == 0);
    }
    SECTION("a BIOS profile on a Bios without Attributes fails naming why") {
        bmc.on("GET", "/redfish/v1/Systems/S1",
               json_reply({{"BiosVersion", "1.0"}, {"Bios", {{"@odata.id", "/redfish/v1/Systems/S1/Bios"}}}}));
        bmc.on("GET", "/redfish/v1/Systems/S1/Bios", json_reply({{"Id", "Bios"}}));
        auto fleet = load_fleet_or_fail(
            write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .bios_toml = "[bios.b]\nsriov = true\n"}));
        FirmwareStage stage(http);
        auto run = run_stage(stage, fleet, fleet.nodes[0]);
        REQUIRE(run.error);
        CHECK(run.error->code == "firmware.bios");
        CHECK(run.error->message.find("bios: GET /redfish/v1/Systems/S1/Bios: /Attributes: missing") !=
              std::string::npos);
    }
}

// ---- kiln-bmc serving DMTF's public trees, through the kiln CLI -----------

TEST_CASE(
    "kiln firmware inventory and plan on DMTF's tower with its NetworkAdapters gone show a warning, not a failure") {
    kiln::test::TempDir dir;
    const std::string tree = dir.file("tower");
    fs::copy(fixture("dmtf-public-tower"), tree, fs::copy_options::recursive);
    REQUIRE(fs::remove_all(tree + "/Chassis/Tower/NetworkAdapters") > 0);
    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", tree, "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));

    // The tower's own BIOS as the profile wants it, written without the
    // build date the system resource shows.
    const std::string fleet = write_fleet(
        dir, {.bmc_urls = {bmc.url()}, .firmware_toml = "[firmware.p]\n" + component_toml("BIOS", "P79 v1.45")});
    auto inv = run_kiln({"firmware", "inventory", fleet});
    INFO(inv.out << inv.err);
    CHECK(inv.exit_code == 0);
    CHECK(inv.out.find("! not read: network_adapters: GET /redfish/v1/Chassis/Tower/NetworkAdapters: HTTP 404") !=
          std::string::npos);
    CHECK(inv.out.find("P79 v1.45") != std::string::npos);

    auto plan = run_kiln({"plan", fleet, "--stage", "firmware"});
    INFO(plan.out << plan.err);
    CHECK(plan.exit_code == 0);
    CHECK(plan.out.find("(0 actions), 0 converged, 0 errors") != std::string::npos);  // the warning is not work
    CHECK(plan.out.find("! inventory part not read: network_adapters") != std::string::npos);

    // A profile that needs the NIC that was under NetworkAdapters (its Name
    // in the full tree): an error naming both.
    kiln::test::TempDir dir2;
    const std::string nic_fleet = write_fleet(
        dir2,
        {.bmc_urls = {bmc.url()}, .firmware_toml = "[firmware.p]\n" + component_toml("Network Adapter", "7.4.10")});
    auto nic = run_kiln({"plan", nic_fleet, "--stage", "firmware"});
    INFO(nic.out << nic.err);
    CHECK(nic.exit_code == 1);
    const std::string all = nic.out + nic.err;
    CHECK(all.find("component 'Network Adapter'") != std::string::npos);
    CHECK(all.find("not read: network_adapters") != std::string::npos);
}

TEST_CASE("every DMTF tree under tests/fixtures/redfish is inventoried by kiln-bmc and the kiln CLI") {
    struct Tree {
        const char* name;
        std::vector<std::string> expect;  // text the inventory shows
    };
    for (const Tree& t : {Tree{"dmtf-public-tower", {"P79 v1.45", "P79 v1.95 (12/06/2019)", "7.4.10"}},
                          Tree{"dmtf-public-bladed", {"P86 v1.58"}},
                          Tree{"dmtf-public-smartnic", {"8.11.0", "P79 v1.45 (12/06/2017)"}}}) {
        INFO(t.name);
        BmcChild bmc;
        REQUIRE(bmc.start({"--mockup", fixture(t.name), "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
        kiln::test::TempDir dir;
        const std::string fleet = write_fleet(dir, {.bmc_urls = {bmc.url()}});
        auto inv = run_kiln({"firmware", "inventory", fleet, "--json"});
        INFO(inv.out << inv.err);
        REQUIRE(inv.exit_code == 0);
        auto j = json::parse(inv.out);
        const std::string shown = j.dump();
        for (const auto& e : t.expect) CHECK(shown.find(e) != std::string::npos);
    }
}
