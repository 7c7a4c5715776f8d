// Issue 14 item 7, request economy: kiln-bmc serves $expand the way its
// tree's service root advertises it (and refuses it, in the Base
// registry's words, where it does not); kiln reads collections expanded
// where offered and member by member where not, to the same inventory; a
// node's steps hand their last read on instead of reading it again.
// Plus issue 14's end-to-end cases through `kiln apply --stage firmware`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "firmware/redfish/session_pool.h"
#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/sha256.h"
#include "provisioner/net/http_client.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/fake_bmc.h"
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

const std::string kRackSystem = "/redfish/v1/Systems/437XR1138R2";

// A copy of `tree` whose service root offers no query parameters.
std::string without_query_support(const kiln::test::TempDir& dir, const std::string& tree, const std::string& name) {
    std::string copy = dir.file(name);
    fs::copy(tree, copy, fs::copy_options::recursive);
    json root = json::parse(std::ifstream(copy + "/index.json"));
    REQUIRE(root.erase("ProtocolFeaturesSupported") == 1);
    std::ofstream(copy + "/index.json") << root.dump(2);
    return copy;
}

// One client on `url`, counting its requests from zero.
struct Reader {
    net::CurlHttpClient http;
    redfish::SessionPool pool{http};
    redfish::Client client;
    explicit Reader(const std::string& url) : client(pool.acquire({url, "admin", kBmcPassword, {}})) {}
};

std::string error_id(const redfish::Response& r) {
    return r.message_ids();
}

FirmwareStageOptions fast_options() {
    FirmwareStageOptions o;
    o.task_poll = milliseconds(50);
    o.settle_poll = milliseconds(50);
    o.task_timeout = milliseconds(20000);
    o.settle_timeout = milliseconds(20000);
    return o;
}

kiln::CommandResult apply(const std::string& fleet) {
    auto r = run_kiln({"apply", fleet, "--stage", "firmware"});
    UNSCOPED_INFO(r.out << r.err);
    return r;
}

std::string bios_image_component(const kiln::test::TempDir& dir, const std::string& version) {
    const std::string content = "KILN-FW BIOS " + version + "\n" + std::string(4096, 'b');
    const std::string path = dir.write("artifacts/bios.bin", content);
    return "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"" + version + "\"\nartifact = \"" +
           path + "\"\nsha256 = \"" + sha256_hex(content) + "\"\n";
}

}  // namespace

// ---- kiln-bmc: $expand as advertised ---------------------------------------

TEST_CASE("kiln-bmc expands a collection's members inline, each as its own GET returns it") {
    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", mockup_path("dmtf-public-rackmount1"), "--port", "0"},
                      {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    Reader r(bmc.url());
    const std::string coll = "/redfish/v1/UpdateService/FirmwareInventory";
    auto plain = r.client.get(coll);
    REQUIRE(plain);
    auto expanded = r.client.get(coll + "?$expand=.($levels=1)");
    REQUIRE(expanded);
    const json& members = expanded->body["Members"];
    REQUIRE(members.size() == plain->body["Members"].size());
    REQUIRE(members.size() > 0);
    for (const auto& m : members) {
        auto own = r.client.get(m["@odata.id"].get<std::string>());
        REQUIRE(own);
        CHECK(m == own->body);
    }
    // Links stay links under '.': the expanded system's Links.Chassis entries are references.
    auto systems = r.client.get("/redfish/v1/Systems?$expand=.");
    REQUIRE(systems);
    const json& sys = systems->body["Members"][0];
    REQUIRE(sys.contains("Links"));
    CHECK(sys["Links"]["Chassis"][0].size() == 1);
}

TEST_CASE("kiln-bmc refuses $expand forms its service root does not advertise, as the Base registry says") {
    kiln::test::TempDir dir;
    BmcChild hpe, bare;
    // The HPE capture: Levels with MaxLevels 1, NoLinks, no ExpandAll.
    REQUIRE(hpe.start({"--mockup", mockup_path("hpe-dl325"), "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    REQUIRE(bare.start(
        {"--mockup", without_query_support(dir, mockup_path("dmtf-public-rackmount1"), "bare"), "--port", "0"},
        {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    Reader h(hpe.url()), b(bare.url());
    auto ok = h.client.get_any("/redfish/v1/Systems?$expand=.($levels=1)");
    REQUIRE(ok);
    CHECK(ok->status == 200);
    auto all = h.client.get_any("/redfish/v1/Systems?$expand=*");
    REQUIRE(all);
    CHECK(all->status == 501);
    CHECK(error_id(*all).find("QueryNotSupported") != std::string::npos);
    auto deep = h.client.get_any("/redfish/v1/Systems?$expand=.($levels=2)");
    REQUIRE(deep);
    CHECK(deep->status == 400);
    CHECK(error_id(*deep).find("QueryParameterOutOfRange") != std::string::npos);
    auto junk = h.client.get_any("/redfish/v1/Systems?$expand=x");
    REQUIRE(junk);
    CHECK(junk->status == 400);
    CHECK(error_id(*junk).find("QueryParameterValueFormatError") != std::string::npos);
    auto none = b.client.get_any("/redfish/v1/Systems?$expand=.");
    REQUIRE(none);
    CHECK(none->status == 501);
    CHECK(error_id(*none).find("QueryNotSupported") != std::string::npos);
}

// ---- kiln: expanded where offered, member by member where not -------------

TEST_CASE("the inventory read expanded is the one read member by member, in fewer requests") {
    kiln::test::TempDir dir;
    const std::string tree = gpu_tree(dir, 3);
    BmcChild offers, not_offered;
    REQUIRE(offers.start({"--mockup", tree, "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    REQUIRE(not_offered.start({"--mockup", without_query_support(dir, tree, "bare"), "--port", "0"},
                              {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    Reader a(offers.url()), b(not_offered.url());
    auto expanded = read_inventory(a.client);
    auto plain = read_inventory(b.client);
    REQUIRE(expanded);
    REQUIRE(plain);
    CHECK(expanded->expand_query == ".($levels=1)");
    CHECK(plain->expand_query.empty());  // nothing asked of a service that does not offer it
    CHECK(expanded->warnings.empty());
    CHECK(plain->warnings.empty());
    CHECK(expanded->to_json() == plain->to_json());
    CHECK(expanded->components.size() >= 8);
    // Eight GPU members and more: one request for the collection instead of one each.
    CHECK(a.client.requests() + 8 <= b.client.requests());
}

TEST_CASE("a service that advertises $expand but refuses it is read member by member and not asked again") {
    FakeBmc bmc;
    bmc.minimal_tree("1.0", "2.0");
    json root = json::parse(bmc.get_bodies().at("/redfish/v1/"));
    root["ProtocolFeaturesSupported"] = {{"ExpandQuery", {{"NoLinks", true}, {"Levels", true}, {"MaxLevels", 1}}}};
    bmc.on("GET", "/redfish/v1/", json_reply(root));
    for (const auto& [path, body] : bmc.get_bodies()) {
        (void)body;
        bmc.on("GET", path + "?$expand=.($levels=1)",
               json_reply({{"error", {{"code", "Base.1.8.QueryNotSupported"}}}}, 501));
    }
    redfish::SessionPool pool(bmc);
    redfish::Client client(pool.acquire({"http://bmc.test:8000", "admin", "pw", {}}));
    auto inv = read_inventory(client);
    REQUIRE(inv);
    CHECK(inv->warnings.empty());
    CHECK(inv->bios_version == "1.0");
    CHECK(inv->bmc_version == "2.0");
    CHECK(find_component(*inv, "BIOS"));
    int asked = 0;
    for (const auto& r : bmc.requests()) asked += r.url.find("$expand") != std::string::npos;
    CHECK(asked == 1);  // the first collection's refusal stops the asking
    CHECK(client.expand().empty());
    client.set_expand(".($levels=1)");  // a later inventory's root cannot switch it back on
    CHECK(client.expand().empty());
}

TEST_CASE("a converged node's verify takes observe's read instead of reading the BMC again") {
    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", mockup_path("dmtf-public-rackmount1"), "--port", "0"},
                      {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    kiln::test::TempDir dir;
    // Converged already: the BIOS the tree runs, the attribute value it holds.
    auto fleet = load_fleet_or_fail(write_fleet(
        dir, {.bmc_urls = {bmc.url()},
              .firmware_toml = "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"P79 v1.45\"\n"
                               "artifact = \"/nonexistent/bios.bin\"\nsha256 = \"" +
                               std::string(64, 'b') + "\"\n",
              .bios_toml = "[bios.b]\nattributes = { ProcHyperthreading = \"Enabled\" }\n"}));
    FirmwareStage stage(nullptr, fast_options());
    stage.begin_run(fleet);
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    CHECK(run.actions.empty());
    const long stage_reads = stage.requests(fleet, fleet.nodes[0].name).at("inventory");
    stage.end_run(fleet);
    CHECK(stage.requests(fleet, fleet.nodes[0].name).empty());  // dropped with the run

    // One inventory read with the BIOS and its registry, by a fresh client
    // (its login counted, as the stage's was).
    Reader once(bmc.url());
    auto inv = read_inventory(once.client, {.bios = true});
    REQUIRE(inv);
    (void)read_bios_registry(once.client, *inv);
    CHECK(stage_reads == once.client.requests());
}

// ---- end to end through `kiln apply --stage firmware` ----------------------

TEST_CASE("kiln apply: eight GPU members with one name are each flashed exactly once, read back from kiln-bmc") {
    kiln::test::TempDir dir;
    const std::string tree = gpu_tree(dir, 0);
    // Expanded and member by member: the same outcome.
    const bool expand = GENERATE(true, false);
    INFO((expand ? "service offers $expand" : "service offers no $expand"));
    BmcChild bmc;
    REQUIRE(bmc.start(
        {"--mockup", expand ? tree : without_query_support(dir, tree, "bare"), "--port", "0", "--task-seconds", "0.3"},
        {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    const std::string fleet =
        write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = gpu_component(dir, "GPU SXM Firmware", "")});
    CHECK(apply(fleet).exit_code == 0);

    auto updates = bmc_get(bmc.url(), "/kiln-bmc/state")["updates"];
    std::map<std::string, int> flashed;
    for (const auto& u : updates)
        for (const auto& t : u["targets"]) ++flashed[t.get<std::string>()];
    REQUIRE(flashed.size() == 8);
    for (const auto& [target, times] : flashed) {
        INFO(target);
        CHECK(times == 1);
        CHECK(bmc_get(bmc.url(), target)["Version"] == "92.00.20.00.01");
    }
    // Converged: a second run flashes nothing.
    CHECK(apply(fleet).exit_code == 0);
    CHECK(bmc_get(bmc.url(), "/kiln-bmc/state")["updates"].size() == updates.size());
}

TEST_CASE("kiln apply: nodes on a four-blade BMC each verify their own system") {
    kiln::test::TempDir dir;
    const std::string tree = dir.file("bladed");
    fs::copy(std::string(KILN_FIXTURE_REDFISH) + "/dmtf-public-bladed", tree, fs::copy_options::recursive);
    const std::string blade0 = "/redfish/v1/Systems/529QB9450R6", blade2 = "/redfish/v1/Systems/529QB9452R6";
    json s = json::parse(std::ifstream(tree + "/Systems/529QB9452R6/index.json"));
    s["BiosVersion"] = "P86 v1.60 (03/01/2016)";  // blade 2 apart from the other three
    std::ofstream(tree + "/Systems/529QB9452R6/index.json") << s.dump(2);
    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", tree, "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    auto component = [](const std::string& version) {
        return "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"" + version +
               "\"\nartifact = \"/nonexistent/bios.bin\"\nsha256 = \"" + std::string(64, 'b') + "\"\n";
    };
    // Two nodes on the one BMC, each at its profile's version on its own blade.
    kiln::test::TempDir both;
    const std::string f = write_fleet(both, {.bmc_urls = {bmc.url(), bmc.url()},
                                             .firmware_toml = component("P86 v1.58"),
                                             .bmc_systems = {blade0, "/redfish/v1/Systems/529QB9451R6"}});
    auto r = apply(f);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("node-0") != std::string::npos);
    CHECK(r.out.find("node-1") != std::string::npos);
    // Blade 2 alone runs 1.60: verified there, and only there.
    kiln::test::TempDir d2, d0;
    CHECK(apply(write_fleet(
                    d2, {.bmc_urls = {bmc.url()}, .firmware_toml = component("P86 v1.60"), .bmc_systems = {blade2}}))
              .exit_code == 0);
    auto wrong = apply(
        write_fleet(d0, {.bmc_urls = {bmc.url()}, .firmware_toml = component("P86 v1.60"), .bmc_systems = {blade0}}));
    CHECK(wrong.exit_code != 0);  // blade 0 runs 1.58, and this BMC cannot update it
    CHECK(bmc_get(bmc.url(), "/kiln-bmc/state")["updates"].empty());
}

TEST_CASE("kiln apply: a reset type the ActionInfo does not allow is never sent") {
    kiln::test::TempDir dir;
    const std::string tree = dir.file("tree");
    fs::copy(mockup_path("dmtf-public-rackmount1"), tree, fs::copy_options::recursive);
    const std::string sys = tree + "/Systems/437XR1138R2";
    json system = json::parse(std::ifstream(sys + "/index.json"));
    auto& reset = system["Actions"]["#ComputerSystem.Reset"];
    reset.erase("ResetType@Redfish.AllowableValues");
    reset["@Redfish.ActionInfo"] = kRackSystem + "/ResetActionInfo";
    std::ofstream(sys + "/index.json") << system.dump(2);
    fs::create_directories(sys + "/ResetActionInfo");
    std::ofstream(sys + "/ResetActionInfo/index.json") << json{
        {"@odata.id", kRackSystem + "/ResetActionInfo"},
        {"@odata.type", "#ActionInfo.v1_1_2.ActionInfo"},
        {"Id", "ResetActionInfo"},
        {"Name", "Reset Action Info"},
        {"Parameters",
         {{{"Name", "ResetType"},
           {"Required", true},
           {"DataType", "String"},
           {"AllowableValues", {"On", "ForceOff"}}}}}}.dump(2);
    BmcChild bmc;
    REQUIRE(
        bmc.start({"--mockup", tree, "--port", "0", "--task-seconds", "0.3"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    // A BIOS update and a BIOS setting: both need the host reset. kiln-bmc
    // answers 400 to a ResetType outside the ActionInfo's list, so the run
    // gets through only if every reset it sent was allowed.
    const std::string fleet =
        write_fleet(dir, {.bmc_urls = {bmc.url()},
                          .firmware_toml = bios_image_component(dir, "P79 v1.50"),
                          .bios_toml = "[bios.b]\nattributes = { ProcHyperthreading = \"Disabled\" }\n"});
    CHECK(apply(fleet).exit_code == 0);
    CHECK(bmc_get(bmc.url(), kRackSystem + "/Bios")["Attributes"]["ProcHyperthreading"] == "Disabled");
    CHECK(bmc_get(bmc.url(), kRackSystem)["BiosVersion"].get<std::string>().rfind("P79 v1.50", 0) == 0);
    auto state = bmc_get(bmc.url(), "/kiln-bmc/state");
    CHECK(state["updates"].size() == 1);
    REQUIRE_FALSE(state["last_boot"].is_null());
    const std::string last = state["last_boot"].dump();
    CHECK(last.find("ForceRestart") == std::string::npos);
}

TEST_CASE("kiln apply: a tree whose NetworkAdapters answer 404 is flashed, with the part named in a warning") {
    kiln::test::TempDir dir;
    const std::string tree = dir.file("tower");
    fs::copy(std::string(KILN_FIXTURE_REDFISH) + "/dmtf-public-tower", tree, fs::copy_options::recursive);
    REQUIRE(fs::remove_all(tree + "/Chassis/Tower/NetworkAdapters") > 0);
    BmcChild bmc;
    REQUIRE(
        bmc.start({"--mockup", tree, "--port", "0", "--task-seconds", "0.3"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    const std::string fleet =
        write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = bios_image_component(dir, "P79 v1.50")});
    auto r = apply(fleet);
    CHECK(r.exit_code == 0);
    CHECK((r.out + r.err).find("inventory part not read: network_adapters") != std::string::npos);
    CHECK((r.out + r.err).find("/redfish/v1/Chassis/Tower/NetworkAdapters: HTTP 404") != std::string::npos);
    CHECK(bmc_get(bmc.url(), "/kiln-bmc/state")["updates"].size() == 1);
    CHECK(bmc_get(bmc.url(), "/redfish/v1/UpdateService/FirmwareInventory/BIOS")["Version"].get<std::string>().rfind(
              "P79 v1.50", 0) == 0);
}
