// Fleet config loading: the values of a full fleet, and every error class
// with its exact FILE:LINE:COL and key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "firmware/stage/firmware_config.h"
#include "firmware/stage/firmware_inputs.h"
#include "images/stage/image_config.h"
#include "images/stage/image_inputs.h"
#include "network/stage/network_config.h"
#include "network/stage/network_inputs.h"
#include "pipelines/smoke/stage/smoke_config.h"
#include "pipelines/smoke/stage/smoke_inputs.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/core/sha256.h"
#include "provisioner/engine/stage.h"
#include "provisioner/handover/stage/handover_config.h"
#include "provisioner/handover/stage/handover_inputs.h"
#include "provisioner/vm/stage/vm_config.h"
#include "provisioner/vm/stage/vm_inputs.h"
#include "tests/support/temp_dir.h"

using kiln::config::Diagnostic;
using kiln::config::load_fleet;
using kiln::config::LoadOptions;
using kiln::test::TempDir;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = KILN_TEST_FIXTURES "/config";
// The shipped pipelines, beside tests/ in the source tree.
const std::string kShippedPipelines = fs::path(KILN_TEST_FIXTURES "/../../pipelines").lexically_normal().string();
// The product's stages (declared by engine::register_product_stages),
// written out so that the loader tests need no registry.
const std::set<std::string> kStages = {"firmware", "network", "image", "vm", "smoke", "handover"};

LoadOptions options() {
    LoadOptions o;
    o.known_stages = kStages;
    // The stage tables the product registers: the firmware stage's four,
    // [images.NAME] and [handover].
    o.tables = kiln::firmware::firmware_tables();
    o.tables.push_back(kiln::images::image_table());
    o.tables.push_back(kiln::network::network_table());
    o.tables.push_back(kiln::vm::vm_table());
    o.tables.push_back(kiln::smoke::smoke_table());
    o.tables.push_back(kiln::handover::handover_table());
    o.pipelines_dir_override = kFixtures + "/pipelines";
    return o;
}

std::string normal(const std::string& p) {
    return fs::path(p).lexically_normal().string();
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Lines 1-5 of most error cases: a valid fleet with one rack. Keys written
// right after it belong to racks[0].
const std::string kBase = "schema = 1\n[fleet]\nname = \"t\"\n[[racks]]\nname = \"r1\"\n";
const std::string kNodeA = "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"reimage\"\n";  // lines 6-9
const std::string kHex64 = std::string(64, 'a');

struct Loaded {
    TempDir dir;
    std::string path;
    kiln::config::LoadResult result;
};

std::unique_ptr<Loaded> load_text(const std::string& toml, const LoadOptions& o = options()) {
    auto l = std::make_unique<Loaded>();
    l->path = l->dir.write("fleet.toml", toml);
    l->result = load_fleet(l->path, o);
    return l;
}

std::string all_errors(const Loaded& l) {
    std::string all;
    for (const auto& d : l.result.errors) all += d.str() + "\n";
    return all;
}

// Exactly one diagnostic, at line:col, for key, containing text.
void expect_one(const Loaded& l, int line, int col, const std::string& key, const std::string& text) {
    INFO(all_errors(l));
    REQUIRE(l.result.errors.size() == 1);
    const Diagnostic& d = l.result.errors.front();
    CHECK(d.pos.file == l.path);
    CHECK(d.pos.line == line);
    CHECK(d.pos.column == col);
    CHECK(d.key == key);
    CHECK_THAT(d.message, Catch::Contains(text));
    CHECK_FALSE(l.result.fleet.has_value());
    const std::string prefix = l.path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": ";
    CHECK(d.str() == prefix + (key.empty() ? "" : key + ": ") + d.message);
}

void expect_ok(const Loaded& l) {
    INFO(all_errors(l));
    CHECK(l.result.errors.empty());
    REQUIRE(l.result.fleet.has_value());
}

}  // namespace

TEST_CASE("config: a full fleet loads with every value", "[config]") {
    auto o = options();
    o.pipelines_dir_override.clear();  // the fleet names its own folder
    // A path with '..' in it: kept as given, the folder made normal.
    const std::string path = kFixtures + "/../config/full.toml";
    auto r = load_fleet(path, o);
    for (const auto& d : r.errors) FAIL_CHECK(d.str());
    REQUIRE(r.fleet.has_value());
    const auto& f = *r.fleet;
    CHECK(f.schema == 1);
    CHECK(f.name == "full");
    CHECK(f.path == path);
    CHECK(f.dir == normal(kFixtures));
    CHECK(f.sha256 == kiln::sha256_hex(slurp(path)));
    CHECK(f.pipelines_dir == normal(kFixtures + "/pipelines"));
    REQUIRE(f.pipelines.size() == 2);
    CHECK(f.pipelines.at("gpu-node").stages ==
          std::vector<std::string>{"firmware", "network", "image", "vm", "smoke", "handover"});
    CHECK(f.pipelines.at("reimage").stages == std::vector<std::string>{"image", "vm", "smoke", "handover"});
    CHECK(f.pipelines.at("reimage").path == normal(kFixtures + "/pipelines") + "/reimage.toml");

    CHECK(f.limits.parallel == 16);
    CHECK(f.limits.per_rack == 4);
    CHECK(f.limits.per_bmc == 1);
    CHECK(f.limits.max_unavailable == 3);
    CHECK(f.limits.retries == 5);
    CHECK(f.limits.backoff_initial == 500ms);
    CHECK(f.limits.backoff_max == 1min);
    CHECK(f.limits.default_timeout == 45min);
    CHECK(f.limits.timeout_for("firmware") == 2h);
    CHECK(f.limits.timeout_for("smoke") == 1200s);  // a bare integer is seconds
    CHECK(f.limits.timeout_for("vm") == 45min);
    CHECK(f.limits.pos.line == 8);

    REQUIRE(f.switches.size() == 2);
    CHECK(f.find_switch("leaf-1")->os == "sonic");
    CHECK(f.find_switch("leaf-1")->address == "127.0.0.1:2201");
    CHECK(f.find_switch("leaf-1")->username == "admin");
    CHECK(f.find_switch("leaf-1")->password->reference() == "env:KILN_SWITCH_PASSWORD");
    CHECK(f.find_switch("leaf-2")->os == "nvue");
    CHECK_FALSE(f.find_switch("leaf-2")->password.has_value());
    CHECK(f.find_switch("leaf-3") == nullptr);
    REQUIRE(f.racks.size() == 2);
    CHECK(f.find_rack("r1")->switches == std::vector<std::string>{"leaf-1", "leaf-2"});
    CHECK(f.find_rack("r2")->switches.empty());
    CHECK(f.find_rack("r3") == nullptr);

    const auto& fw = kiln::firmware::firmware_profiles(f)->at("h100-2026q4");
    REQUIRE(fw.components.size() == 2);
    CHECK(fw.components[0].name == "BIOS");
    CHECK(fw.components[0].version == "2.4.1");
    CHECK(fw.components[0].sha256 == "ab4c7f9d3e2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c");
    CHECK(fw.components[0].artifact == normal(kFixtures + "/artifacts/bios-2.4.1.bin"));
    CHECK(fw.components[1].artifact == "/srv/fw/bmc-7.10.bin");
    const auto& bios = kiln::firmware::bios_profiles(f)->at("gpu");
    CHECK(bios.sriov == true);
    CHECK(bios.iommu == true);
    CHECK(bios.acs == false);
    CHECK(bios.above_4g_decoding == true);
    CHECK(bios.extra.at("ProcVirtualization") == "Enabled");
    CHECK(bios.extra.at("NumaNodesPerSocket") == "1");
    CHECK(bios.extra.at("Turbo") == "false");
    const auto& net = kiln::network::network_profiles(f)->at("roce");
    CHECK(net.lossless_priority == 3);
    CHECK(net.ecn_min_kb == 100);
    CHECK(net.ecn_max_kb == 1000);
    CHECK(net.ecn_probability_pct == 5);
    CHECK(net.pfc_watchdog_action == "forward");
    CHECK(net.pfc_watchdog_detection_ms == 100);
    CHECK(net.pfc_watchdog_poll_ms == 100);
    CHECK(net.pfc_watchdog_restoration_ms == 300);
    CHECK(net.switch_mtu == 9216);
    CHECK(net.buffer_policy == "lossless");  // default
    // What the file wrote, apart from kiln's defaults (NVUE keeps RoCE mode's for the rest).
    CHECK(net.is_given("ecn_probability_pct"));
    CHECK(net.is_given("pfc_watchdog.detection_ms"));
    CHECK_FALSE(net.is_given("buffer_policy"));
    CHECK(kiln::images::image_profiles(f)->at("gpu-guest").recipe ==
          normal(kFixtures + "/../../../images/recipes/gpu-guest-lite.toml"));
    CHECK(kiln::vm::vm_shapes(f)->at("whole").split == "numa");
    CHECK(kiln::vm::vm_shapes(f)->at("whole").vcpus == 8);
    CHECK(kiln::vm::vm_shapes(f)->at("whole").memory_gib == 16);
    CHECK_FALSE(kiln::vm::vm_shapes(f)->at("whole").hugepages);
    CHECK(kiln::smoke::smoke_profiles(f)->at("default").thresholds.at("gemm_tflops") == Approx(300));
    CHECK(kiln::smoke::smoke_profiles(f)->at("default").thresholds.at("loss_drop_fraction") == Approx(0.2));
    CHECK(kiln::smoke::smoke_profiles(f)->at("default").timeout == 20min);
    const auto* hook = kiln::handover::handover_hook(f);
    REQUIRE(hook != nullptr);
    CHECK(hook->command == std::vector<std::string>{"/usr/local/bin/cmdb-mark", "--ready"});
    CHECK(hook->webhook.empty());
    CHECK(hook->timeout == 30s);

    REQUIRE(f.nodes.size() == 2);
    const auto& n1 = f.nodes[0];
    CHECK(f.find_node("node-01") == &n1);
    CHECK(f.find_node("node-03") == nullptr);
    CHECK(n1.rack == "r1");
    CHECK(n1.role == "gpu-node");  // from [defaults]
    CHECK(n1.profile("firmware") == "h100-2026q4");
    CHECK(n1.profile("bios") == "gpu");
    CHECK(n1.profile("network") == "roce");
    CHECK(n1.profile("image") == "gpu-guest");
    CHECK(n1.profile("vm") == "whole");
    CHECK(n1.profile("smoke") == "default");
    CHECK(n1.bmc.url == "https://127.0.0.1:8443");
    CHECK(n1.bmc.username == "root");  // merged from defaults.bmc
    CHECK(n1.bmc.password->reference() == "env:KILN_BMC_PASSWORD");
    CHECK(n1.bmc.ca_bundle.empty());
    CHECK_FALSE(n1.bmc.verify_tls);
    CHECK(n1.bmc.fingerprint == "aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899");
    CHECK(n1.labels.at("slot") == "u12");
    CHECK(n1.pos.file == path);
    CHECK(n1.pos.line == 107);
    CHECK(n1.pos.column == 1);
    const auto& n2 = f.nodes[1];
    CHECK(n2.name == "node-02");
    CHECK(n2.role == "reimage");
    CHECK(n2.profile("firmware") == "h100-2026q4");
    CHECK(n2.bmc.username == "root");
    CHECK(n2.bmc.verify_tls);
    CHECK(n2.bmc.ca_bundle == normal(kFixtures + "/certs/ca.pem"));
    CHECK(n2.bmc.password->kind() == kiln::Secret::Kind::File);
    CHECK(n2.bmc.password->reference() == "file:secrets/bmc-02");
}

TEST_CASE("config: defaults apply when a fleet says little", "[config]") {
    auto l =
        load_text(kBase + "[network.plain]\n[vm.plain]\n[smoke.plain]\n[images.i]\nrecipe = \"r.toml\"\n" + kNodeA);
    expect_ok(*l);
    const auto& f = *l->result.fleet;
    CHECK(f.limits.parallel == 32);
    CHECK(f.limits.per_rack == 0);
    CHECK(f.limits.per_bmc == 2);
    CHECK(f.limits.per_switch == 1);
    CHECK(f.limits.max_unavailable == 0);
    CHECK(f.limits.retries == 3);
    CHECK(f.limits.backoff_initial == 2s);
    CHECK(f.limits.backoff_max == 2min);
    CHECK(f.limits.timeout_for("firmware") == 60min);
    CHECK(kiln::handover::handover_hook(f) == nullptr);
    const auto& net = kiln::network::network_profiles(f)->at("plain");
    CHECK(net.roce_dscp == 26);
    CHECK(net.cnp_dscp == 48);
    CHECK(net.cnp_priority == 6);
    CHECK(net.ecn_min_kb == 150);
    CHECK(net.ecn_max_kb == 1500);
    CHECK(net.pfc_watchdog_action == "drop");
    CHECK(net.host_mtu == 9000);
    CHECK(net.given.empty());
    CHECK(kiln::vm::vm_shapes(f)->at("plain").split == "whole");
    CHECK(kiln::vm::vm_shapes(f)->at("plain").hugepages);
    CHECK(kiln::smoke::smoke_profiles(f)->at("plain").timeout == 20min);
    CHECK(kiln::images::image_profiles(f)->at("i").recipe == l->dir.path() + "/r.toml");  // need not exist
    const auto& n = f.nodes.at(0);
    CHECK(n.profile("firmware").empty());
    CHECK(n.bmc.url.empty());  // reimage has no firmware stage
    CHECK(n.bmc.verify_tls);
    CHECK_FALSE(n.bmc.password.has_value());
    CHECK(f.dir == l->dir.path());
    CHECK(f.pipelines_dir == normal(kFixtures + "/pipelines"));
}

TEST_CASE("config: each shipped stage's inputs hold what it depends on, from the fleet", "[config]") {
    auto o = options();
    o.pipelines_dir_override.clear();
    auto r = load_fleet(kFixtures + "/full.toml", o);
    REQUIRE(r.fleet);
    const auto& f = *r.fleet;
    auto fw = kiln::firmware::firmware_inputs(f, f.nodes[0]);
    CHECK(fw["bmc"]["url"] == "https://127.0.0.1:8443");
    CHECK(fw["bmc"]["username"] == "root");
    CHECK(fw["bmc"]["password"] == "env:KILN_BMC_PASSWORD");  // the reference, never a value
    CHECK(fw["bmc"]["ca_bundle"] == "");
    CHECK(fw["bmc"]["verify_tls"] == false);
    CHECK(fw["bmc"]["fingerprint"] == f.nodes[0].bmc.fingerprint);
    REQUIRE(fw["firmware"].size() == 2);
    CHECK(fw["firmware"][0]["name"] == "BIOS");
    CHECK(fw["firmware"][0]["version"] == "2.4.1");
    CHECK(fw["firmware"][0]["sha256"] == "ab4c7f9d3e2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c");
    CHECK(fw["firmware"][0]["artifact"] == normal(kFixtures + "/artifacts/bios-2.4.1.bin"));
    CHECK(fw["bios"]["acs"] == false);
    CHECK(fw["bios"]["above_4g_decoding"] == true);
    CHECK(fw["bios"]["attributes"]["Turbo"] == "false");
    CHECK(kiln::firmware::firmware_inputs(f, f.nodes[1])["bmc"]["password"] == "file:secrets/bmc-02");

    auto net = kiln::network::network_inputs(f, f.nodes[0]);
    CHECK(net["rack"] == "r1");
    REQUIRE(net["switches"].size() == 2);
    CHECK(net["switches"][0] == nlohmann::json{{"name", "leaf-1"}, {"os", "sonic"}, {"address", "127.0.0.1:2201"}});
    CHECK(net["profile"]["roce_dscp"] == 26);
    CHECK(net["profile"]["ecn_min_kb"] == 100);
    CHECK(net["profile"]["pfc_watchdog_action"] == "forward");
    // Every RoceProfile field but the name and position, and the ECN keys the
    // file wrote (only when it wrote some: other fleets' hashes stay).
    CHECK(net["profile"].size() == 15);
    CHECK(net["profile"]["ecn_given"] == nlohmann::json{"ecn_min_kb", "ecn_max_kb", "ecn_probability_pct"});
    CHECK(kiln::network::network_inputs(f, f.nodes[1])["switches"].empty());
    CHECK(net.dump().find("KILN_SWITCH_PASSWORD") == std::string::npos);  // no switch credentials at all

    CHECK(kiln::images::image_inputs(f, f.nodes[0]) ==
          nlohmann::json{{"image", "gpu-guest"},
                         {"recipe", normal(kFixtures + "/../../../images/recipes/gpu-guest-lite.toml")}});
    CHECK(kiln::vm::vm_inputs(f, f.nodes[0]) == nlohmann::json{{"shape",
                                                                {{"split", "numa"},
                                                                 {"vcpus", 8},
                                                                 {"memory_gib", 16},
                                                                 {"hugepages", false},
                                                                 {"hugepage_size", "1G"},
                                                                 {"accelerator", "auto"},
                                                                 {"network", "slirp"},
                                                                 {"sysfs", "/sys"},
                                                                 {"images_dir", ""},
                                                                 {"base_image", ""},
                                                                 {"ssh_authorized_keys", nlohmann::json::array()}}},
                                                               {"image", "gpu-guest"},
                                                               {"libvirt_uri", ""}});
    auto smoke = kiln::smoke::smoke_inputs(f, f.nodes[0]);
    CHECK(smoke["profile"] == "default");
    CHECK(smoke["timeout_ms"] == 20 * 60 * 1000);
    CHECK(smoke["thresholds"]["allreduce_busbw_gbps"] == Approx(1.5));
    auto hand = kiln::handover::handover_inputs(f, f.nodes[0]);
    CHECK(hand["command"] == nlohmann::json{"/usr/local/bin/cmdb-mark", "--ready"});
    CHECK(hand["webhook"] == "");
    CHECK(hand["secret"].is_null());
    CHECK(kiln::engine::node_identity_inputs(f.nodes[0]) ==
          nlohmann::json{{"node", "node-01"}, {"rack", "r1"}, {"role", "gpu-node"}, {"labels", {{"slot", "u12"}}}});
    // Canonical: the same config gives the same bytes.
    auto again = load_fleet(kFixtures + "/full.toml", o);
    REQUIRE(again.fleet);
    CHECK(kiln::firmware::firmware_inputs(*again.fleet, again.fleet->nodes[0]).dump() == fw.dump());
}

TEST_CASE("config: small helpers", "[config]") {
    CHECK(kiln::config::SourcePos{"a/fleet.toml", 3, 7}.str() == "a/fleet.toml:3:7");
    CHECK(Diagnostic{{"f.toml", 3, 7}, "nodes[0].rack", "no rack 'x'; defined: r1"}.str() ==
          "f.toml:3:7: nodes[0].rack: no rack 'x'; defined: r1");
    CHECK(Diagnostic{{"f.toml", 2, 1}, "", "cannot read file"}.str() == "f.toml:2:1: cannot read file");
    kiln::config::Limits l;
    l.default_timeout = 5min;
    l.stage_timeouts["vm"] = 30s;
    CHECK(l.timeout_for("vm") == 30s);
    CHECK(l.timeout_for("image") == 5min);
}

TEST_CASE("config: find_node uses its index and still sees nodes renamed or added since", "[config]") {
    kiln::config::Fleet f;
    for (const char* n : {"a", "b", "c"}) {
        kiln::config::Node node;
        node.name = n;
        f.nodes.push_back(node);
    }
    f.index_nodes();
    REQUIRE(f.find_node("b") == &f.nodes[1]);
    REQUIRE(f.find_node("zz") == nullptr);
    f.nodes[1].name = "bb";  // renamed after indexing
    CHECK(f.find_node("b") == nullptr);
    CHECK(f.find_node("bb") == &f.nodes[1]);
    f.nodes.push_back(f.nodes[0]);
    f.nodes.back().name = "d";  // added after indexing
    CHECK(f.find_node("d") == &f.nodes.back());
    CHECK(f.find_node("c") == &f.nodes[2]);
}

TEST_CASE("config: a TOML syntax error is one diagnostic at its position", "[config][errors]") {
    // The unknown key before it is not reported: nothing is read after a syntax error.
    auto l = load_text("schema = 1\ncolour = 1\n[fleet]\nname = \n");
    INFO(all_errors(*l));
    REQUIRE(l->result.errors.size() == 1);
    const auto& d = l->result.errors.front();
    CHECK(d.pos.file == l->path);
    CHECK(d.pos.line == 4);
    CHECK(d.pos.column == 8);
    CHECK(d.key.empty());
    CHECK_FALSE(d.message.empty());
    CHECK(d.str() == l->path + ":4:8: " + d.message);
    CHECK_FALSE(l->result.fleet.has_value());
    // A key defined twice is a syntax error in TOML.
    auto dup = load_text("schema = 1\nschema = 1\n");
    REQUIRE(dup->result.errors.size() == 1);
    CHECK(dup->result.errors[0].pos.line == 2);
    CHECK(dup->result.errors[0].key.empty());
}

TEST_CASE("config: a non-ASCII character outside strings is refused before toml++ sees it", "[config][errors]") {
    // toml++ 3.3 reaches undefined behaviour (__builtin_unreachable) on
    // these; found by scripts/fuzz.sh fleet-config.
    struct Bad {
        std::string line;
        int column;
    };
    for (const Bad& bad : {Bad{"schema = 1\xc3\xa9\n", 11}, Bad{"schema = 1 \xe3\x80\x81\n", 12}}) {
        auto l = load_text("[fleet]\nname = \"x\"\n" + bad.line);
        REQUIRE(l->result.errors.size() == 1);
        const auto& d = l->result.errors[0];
        CHECK(d.pos.line == 3);
        CHECK(d.pos.column == bad.column);
        CHECK(d.message == "a non-ASCII character outside a string or comment");
    }
    // Inside strings of every kind, quoted keys and comments: fine.
    const std::string e = "\xc3\xa9";
    auto ok = load_text("schema = 1 # caf" + e + "\n[fleet]\nname = \"caf" + e + " \\\"q\\\"\"\n" +
                        "description = '''a\n" + e + "'''\nnote = \"\"\"\n" + e + " \\\"\"\"\"\"\n");
    INFO(all_errors(*ok));
    for (const auto& d : ok->result.errors) CHECK(d.message != "a non-ASCII character outside a string or comment");
}

TEST_CASE("config: [images.NAME] and a node's image key belong to the image module", "[config][errors]") {
    const std::string fleet = kBase + "[images.g]\nrecipe = \"x.toml\"\n" + kNodeA + "image = \"g\"\n";
    auto with = load_text(fleet);
    INFO(all_errors(*with));
    REQUIRE(with->result.fleet);
    CHECK(with->result.fleet->nodes.at(0).profile("image") == "g");
    CHECK(kiln::images::image_profile(*with->result.fleet, with->result.fleet->nodes.at(0))->recipe ==
          with->dir.path() + "/x.toml");

    LoadOptions o = options();
    o.tables.erase(std::remove_if(o.tables.begin(), o.tables.end(),
                                  [](const kiln::config::ConfigTable& t) { return t.key == "images"; }),
                   o.tables.end());
    auto without = load_text(fleet, o);
    const std::string all = all_errors(*without);
    INFO(all);
    REQUIRE_FALSE(without->result.fleet);
    CHECK(without->result.errors.size() == 2);
    CHECK(all.find(":6:2: images: unknown key 'images'") != std::string::npos);
    CHECK(all.find(":12:1: nodes[0].image: unknown key 'image'") != std::string::npos);
}

TEST_CASE("config: a node's smoke pick finds its profile, and the smoke module groups nodes by it", "[config]") {
    // Lines 6-7: the profile, a rack ring; node a (line 12 on) picks it.
    const std::string fleet = kBase + "[smoke.s]\nscope = \"rack\"\n" + kNodeA + "smoke = \"s\"\n";
    auto with = load_text(fleet);
    INFO(all_errors(*with));
    REQUIRE(with->result.fleet);
    const auto& f = *with->result.fleet;
    CHECK(f.nodes.at(0).profile("smoke") == "s");
    REQUIRE(kiln::smoke::smoke_profile(f, f.nodes.at(0)));
    CHECK(kiln::smoke::smoke_profile(f, f.nodes.at(0))->scope == "rack");
    CHECK(kiln::smoke::ring_scope(f, f.nodes.at(0)) == "rack");
    // The module asked for its picks to be indexed (ConfigTable::group_nodes).
    CHECK(f.grouped_picks.count("smoke") == 1);
}

TEST_CASE("config: [network.NAME], [vm.NAME], [smoke.NAME] and the node keys that pick them belong to their modules",
          "[config][errors]") {
    for (const std::string key : {"network", "vm", "smoke"}) {
        INFO(key);
        // Line 6: the profile (every key optional); line 11: the node's pick.
        const std::string fleet = kBase + "[" + key + ".p]\n" + kNodeA + key + " = \"p\"\n";
        auto with = load_text(fleet);
        INFO(all_errors(*with));
        REQUIRE(with->result.fleet);
        CHECK(with->result.fleet->nodes.at(0).profile(key) == "p");
        CHECK(with->result.fleet->tables.count(key) == 1);
        // A pick of a profile the table does not define names those it does.
        expect_one(*load_text(kBase + "[" + key + ".p]\n" + kNodeA + key + " = \"q\"\n"), 11,
                   static_cast<int>(key.size()) + 4, "nodes[0]." + key, "no " + key + " profile 'q'; defined: p");

        LoadOptions o = options();
        o.tables.erase(std::remove_if(o.tables.begin(), o.tables.end(),
                                      [&](const kiln::config::ConfigTable& t) { return t.key == key; }),
                       o.tables.end());
        auto without = load_text(fleet, o);
        const std::string all = all_errors(*without);
        INFO(all);
        REQUIRE_FALSE(without->result.fleet);
        CHECK(without->result.errors.size() == 2);
        CHECK(all.find(":6:2: " + key + ": unknown key '" + key + "'") != std::string::npos);
        CHECK(all.find(":11:1: nodes[0]." + key + ": unknown key '" + key + "'") != std::string::npos);
    }
}

TEST_CASE("config: a firmware component's match and related_item, a node's bmc.system", "[config][errors]") {
    const std::string comp =
        "[firmware.f]\n[[firmware.f.components]]\nname = \"GPU\"\nversion = \"1\"\nartifact = "
        "\"a.bin\"\nsha256 = \"" +
        kHex64 + "\"\n";
    auto ok = load_text(kBase + comp + "match = \"GPU_SXM_*\"\nrelated_item = \"/redfish/v1/Systems/Node1\"\n");
    INFO(all_errors(*ok));
    REQUIRE(ok->result.errors.empty());
    const auto& c = kiln::firmware::firmware_profiles(*ok->result.fleet)->at("f").components.at(0);
    CHECK(c.match == "GPU_SXM_*");
    CHECK(c.related_item == "/redfish/v1/Systems/Node1");
    expect_one(*load_text(kBase + comp + "related_item = \"Systems/Node1\"\n"), 12, 16,
               "firmware.f.components[0].related_item", "expected a Redfish path starting with /redfish/");
    // A node's system on a shared BMC.
    expect_one(*load_text(kBase + "[defaults]\nbmc = { system = \"Systems/1\" }\n"), 7, 18, "defaults.bmc.system",
               "expected the system's Redfish path, starting with /redfish/");
}

TEST_CASE("config: unknown keys, at the key, with what was expected", "[config][errors]") {
    expect_one(*load_text("schema = 1\ncolour = \"blue\"\n[fleet]\nname = \"t\"\n"), 2, 1, "colour",
               "unknown key 'colour'; expected one of: artifact_server, bios, cabling, defaults, firmware, fleet, "
               "handover, host_os, images, limits, network, nodes, racks, schema, smoke, store, switches, uplinks, vm");
    expect_one(*load_text(kBase + "colour = \"blue\"\n"), 6, 1, "racks[0].colour",
               "unknown key 'colour'; expected one of: name, switches");
    expect_one(*load_text(kBase + "[limits]\nparralel = 4\n"), 7, 1, "limits.parralel",
               "expected one of: backoff_initial, backoff_max, max_unavailable, parallel, per_bmc, per_rack, "
               "per_switch, retries, timeout, timeouts");
    expect_one(
        *load_text(kBase + kNodeA + "bmc = { url = \"https://h\", passwd = \"env:X\" }\n"), 10, 28,
        "nodes[0].bmc.passwd",
        "unknown key 'passwd'; expected one of: ca_bundle, fingerprint, password, system, url, username, verify_tls");
    expect_one(*load_text(kBase + "[switches.leaf-1]\nos = \"eos\"\naddress = \"h\"\ncolour = 1\n"), 9, 1,
               "switches.leaf-1.colour", "unknown key 'colour'");
    expect_one(*load_text(kBase +
                          "[firmware.f]\n[[firmware.f.components]]\nname = \"BIOS\"\nversion = \"1\"\n"
                          "artifact = \"a.bin\"\nsha256 = \"" +
                          kHex64 + "\"\nflash = true\n"),
               12, 1, "firmware.f.components[0].flash", "unknown key 'flash'");
    expect_one(*load_text(kBase + "[network.r]\npfc_watchdog = { action = \"drop\", interval = 5 }\n"), 7, 35,
               "network.r.pfc_watchdog.interval", "expected one of: action, detection_ms, poll_ms, restoration_ms");
}

TEST_CASE("config: wrong types and out-of-range values", "[config][errors]") {
    expect_one(*load_text(kBase + "[limits]\nparallel = \"many\"\n"), 7, 12, "limits.parallel",
               "expected integer, found string");
    expect_one(*load_text(kBase + "[limits]\nparallel = 0\n"), 7, 12, "limits.parallel", "expected 1..100000, found 0");
    expect_one(*load_text(kBase + "[limits]\nper_bmc = 0\n"), 7, 11, "limits.per_bmc", "found 0");
    expect_one(*load_text(kBase + "[network.roce]\nlossless_priority = 9\n"), 7, 21, "network.roce.lossless_priority",
               "expected 0..7, found 9");
    expect_one(*load_text(kBase + "[network.roce]\nhost_mtu = 1000\n"), 7, 12, "network.roce.host_mtu",
               "expected 1280..9000, found 1000");
    expect_one(*load_text(kBase + "[vm.small]\nhugepages = \"yes\"\n"), 7, 13, "vm.small.hugepages",
               "expected boolean, found string");
    expect_one(*load_text(kBase + "[vm.small]\nvcpus = -1\n"), 7, 9, "vm.small.vcpus", "found -1");
    expect_one(*load_text(kBase + "[vm.small]\ntcg_parallel_boots = 0\n"), 7, 22, "vm.small.tcg_parallel_boots",
               "expected 1..1024, found 0");
    {
        auto three = load_text(kBase + "[vm.small]\ntcg_parallel_boots = 3\n[vm.plain]\n");
        expect_ok(*three);
        CHECK(kiln::vm::vm_shapes(*three->result.fleet)->at("small").tcg_parallel_boots == 3);
        CHECK(kiln::vm::vm_shapes(*three->result.fleet)->at("plain").tcg_parallel_boots ==
              1);  // one at a time unless set
    }
    expect_one(*load_text("schema = 2\n[fleet]\nname = \"t\"\n"), 1, 10, "schema", "expected 1");
    expect_one(*load_text("schema = \"1\"\n[fleet]\nname = \"t\"\n"), 1, 10, "schema",
               "expected integer, found string");
    expect_one(*load_text("schema = 1\nnodes = 1\n[fleet]\nname = \"t\"\n"), 2, 9, "nodes",
               "expected array, found integer");
    expect_one(*load_text(kBase + "[switches.s1]\nos = \"junos\"\naddress = \"x\"\n"), 7, 6, "switches.s1.os",
               "expected one of sonic, nvue, eos");
    expect_one(*load_text(kBase + kNodeA + "labels = { slot = 12 }\n"), 10, 19, "nodes[0].labels.slot",
               "expected string, found integer");
    expect_one(*load_text(kBase + "[bios.b]\n[bios.b.attributes]\nX = 1.5\n"), 8, 5, "bios.b.attributes.X",
               "expected string, integer or boolean, found float");
    expect_one(*load_text(kBase + "[smoke.s]\n[smoke.s.thresholds]\nbusbw = \"fast\"\n"), 8, 9,
               "smoke.s.thresholds.busbw", "expected number, found string");
}

TEST_CASE("config: missing required keys are reported at their table", "[config][errors]") {
    expect_one(*load_text(kBase + "[[nodes]]\nrack = \"r1\"\nrole = \"reimage\"\n"), 6, 1, "nodes[0].name",
               "required key is missing");
    expect_one(*load_text("schema = 1\n[fleet]\npipelines = \"p\"\n"), 2, 1, "fleet.name", "required key is missing");
    expect_one(*load_text("schema = 1\n"), 1, 1, "fleet", "required key is missing");
    expect_one(*load_text("[fleet]\nname = \"t\"\n"), 1, 1, "schema", "required key is missing");
    expect_one(*load_text(kBase + "[switches.s1]\nos = \"eos\"\n"), 6, 1, "switches.s1.address",
               "required key is missing");
    expect_one(*load_text(kBase +
                          "[firmware.f]\n[[firmware.f.components]]\nname = \"BIOS\"\nversion = \"1\"\n"
                          "sha256 = \"" +
                          kHex64 + "\"\n"),
               7, 1, "firmware.f.components[0].artifact", "required key is missing");
    expect_one(*load_text(kBase + "[images.g]\n"), 6, 1, "images.g.recipe", "required key is missing");
    expect_one(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\n"), 6, 1, "nodes[0].role",
               "required key is missing (and [defaults] has no role)");
}

TEST_CASE("config: duplicate node and rack names point at the second", "[config][errors]") {
    auto l = load_text(kBase + kNodeA + kNodeA);
    expect_one(*l, 11, 8, "nodes[1].name", "duplicate node name 'a' (first at " + l->path + ":7:8)");
    auto r = load_text(kBase + "[[racks]]\nname = \"r1\"\n");
    expect_one(*r, 7, 8, "racks[1].name", "duplicate rack name 'r1' (first at " + r->path + ":5:8)");
}

TEST_CASE("config: references to undefined racks, pipelines, profiles, switches", "[config][errors]") {
    expect_one(*load_text(kBase + "[[racks]]\nname = \"r2\"\n[[nodes]]\nname = \"a\"\nrack = \"r9\"\n"
                                  "role = \"reimage\"\n"),
               10, 8, "nodes[0].rack", "no rack 'r9'; defined: r1, r2");
    expect_one(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"nope\"\n"), 9, 8, "nodes[0].role",
               "no pipeline 'nope' in " + normal(kFixtures + "/pipelines") + "; defined: gpu-node, reimage");
    expect_one(*load_text(kBase + kNodeA + "firmware = \"fw\"\n"), 10, 12, "nodes[0].firmware",
               "no firmware profile 'fw'; defined: (none)");
    expect_one(*load_text(kBase + "[bios.gpu]\n[bios.cpu]\n" + kNodeA + "bios = \"b\"\n"), 12, 8, "nodes[0].bios",
               "no bios profile 'b'; defined: cpu, gpu");
    expect_one(*load_text(kBase + kNodeA + "network = \"fast\"\n"), 10, 11, "nodes[0].network",
               "no network profile 'fast'; defined: (none)");
    expect_one(*load_text(kBase + "[images.g]\nrecipe = \"x.toml\"\n" + kNodeA + "image = \"h\"\n"), 12, 9,
               "nodes[0].image", "no image profile 'h'; defined: g");
    expect_one(*load_text(kBase + kNodeA + "vm = \"big\"\n"), 10, 6, "nodes[0].vm", "no vm profile 'big'");
    expect_one(*load_text(kBase + "[defaults]\nsmoke = \"quick\"\n"), 7, 9, "defaults.smoke",
               "no smoke profile 'quick'; defined: (none)");
    expect_one(*load_text(kBase + "[switches.leaf-1]\nos = \"eos\"\naddress = \"h\"\n"
                                  "[[racks]]\nname = \"r2\"\nswitches = [\"leaf-1\", \"leaf-9\"]\n"),
               11, 23, "racks[1].switches[1]", "no switch 'leaf-9'; defined: leaf-1");
    // A bad default role is reported once, at [defaults], not again per node.
    expect_one(*load_text(kBase + "[defaults]\nrole = \"nope\"\n[[nodes]]\nname = \"a\"\nrack = \"r1\"\n"), 7, 8,
               "defaults.role", "no pipeline 'nope'");
}

TEST_CASE("config: a literal secret is an error that never shows the value", "[config][errors][secrets]") {
    auto l = load_text(kBase + kNodeA + "bmc = { url = \"https://h\", password = \"hunter2\" }\n");
    expect_one(*l, 10, 39, "nodes[0].bmc.password", "a literal secret is not allowed; write env:NAME or file:PATH");
    CHECK(l->result.errors.front().str().find("hunter2") == std::string::npos);
    auto s = load_text(kBase + "[switches.s1]\nos = \"eos\"\naddress = \"h\"\npassword = \"admin123\"\n");
    expect_one(*s, 9, 12, "switches.s1.password", "literal secret");
    CHECK(s->result.errors.front().str().find("admin123") == std::string::npos);
    auto h = load_text(kBase + "[handover]\nwebhook = \"https://h/x\"\nsecret = \"s3cr3t-value\"\n");
    expect_one(*h, 8, 10, "handover.secret", "literal secret");
    CHECK(h->result.errors.front().str().find("s3cr3t") == std::string::npos);
    auto d = load_text(kBase + "[defaults]\nbmc = { password = \"Passw0rd!\" }\n");
    expect_one(*d, 7, 20, "defaults.bmc.password", "literal secret");
    CHECK(d->result.errors.front().str().find("Passw0rd") == std::string::npos);
    auto e = load_text(kBase + kNodeA + "bmc = { url = \"https://h\", password = \"env:\" }\n");
    expect_one(*e, 10, 39, "nodes[0].bmc.password", "expected env:NAME");
    // A password inside the URL is refused too, and not echoed.
    auto u = load_text(kBase + kNodeA + "bmc = { url = \"https://root:pw123@h:8443\" }\n");
    expect_one(*u, 10, 15, "nodes[0].bmc.url", "credentials in the URL are not allowed");
    CHECK(u->result.errors.front().str().find("pw123") == std::string::npos);
    // References load, unresolved.
    auto ok = load_text(kBase + kNodeA + "bmc = { url = \"https://h\", password = \"file:pw/bmc\" }\n");
    expect_ok(*ok);
    CHECK(ok->result.fleet->nodes[0].bmc.password->reference() == "file:pw/bmc");
}

TEST_CASE("config: bad durations, digests, URLs and fingerprints", "[config][errors]") {
    expect_one(*load_text(kBase + "[limits]\nbackoff_initial = \"soon\"\n"), 7, 19, "limits.backoff_initial",
               "expected a duration such as \"500ms\", \"90s\", \"15m\", \"2h\", found \"soon\"");
    expect_one(*load_text(kBase + "[smoke.s]\ntimeout = 1.5\n"), 7, 11, "smoke.s.timeout",
               "expected duration string such as \"90s\", found float");
    expect_one(*load_text(kBase + "[limits.timeouts]\nvm = \"3y\"\n"), 7, 6, "limits.timeouts.vm",
               "expected a duration");
    expect_one(*load_text(kBase + "[firmware.f]\n[[firmware.f.components]]\nname = \"BIOS\"\nversion = \"1\"\n"
                                  "artifact = \"a.bin\"\nsha256 = \"abc\"\n"),
               11, 10, "firmware.f.components[0].sha256", "expected 64 hex digits, found 3 characters");
    expect_one(*load_text(kBase +
                          "[firmware.f]\n[[firmware.f.components]]\nname = \"BIOS\"\nversion = \"1\"\n"
                          "artifact = \"a.bin\"\nsha256 = \"" +
                          std::string(63, 'a') + "g\"\n"),
               11, 10, "firmware.f.components[0].sha256", "expected 64 hex digits");
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"ftp://h\" }\n"), 10, 15, "nodes[0].bmc.url",
               "expected an http:// or https:// URL with a host");
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"https://\" }\n"), 10, 15, "nodes[0].bmc.url",
               "with a host");
    expect_one(*load_text(kBase + "[handover]\nwebhook = \"mailto:ops@example\"\n"), 7, 11, "handover.webhook",
               "expected an http:// or https:// URL with a host");
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"https://h\", fingerprint = \"12ab\" }\n"), 10, 42,
               "nodes[0].bmc.fingerprint", "64 hex digits");
    expect_one(*load_text(kBase + "[limits.timeouts]\nfirmwares = \"1h\"\n"), 7, 1, "limits.timeouts.firmwares",
               "no stage named 'firmwares'; known: firmware, handover, image, network, smoke, vm");
    // Good forms: IPv6 host, port and path; uppercase hex stored lowercase.
    auto ok = load_text(kBase + kNodeA + "bmc = { url = \"https://[fd00::1]:8443/redfish/v1\", fingerprint = \"" +
                        std::string(64, 'A') + "\" }\n");
    expect_ok(*ok);
    CHECK(ok->result.fleet->nodes[0].bmc.fingerprint == kHex64);
}

TEST_CASE("config: a node that runs the firmware stage needs a BMC URL", "[config][errors]") {
    expect_one(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"gpu-node\"\n"), 6, 1,
               "nodes[0].bmc.url", "required: pipeline 'gpu-node' has the firmware stage");
    // The URL may come from [defaults].
    expect_ok(*load_text(kBase + "[defaults]\nbmc = { url = \"https://bmc\" }\n[[nodes]]\nname = \"a\"\nrack = \"r1\"\n"
                                 "role = \"gpu-node\"\n"));
    // The rule is the firmware module's (its table's fleet check): the
    // second node, after one that has its URL, is named by its own index.
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"https://bmc\" }\n" +
                          "[[nodes]]\nname = \"b\"\nrack = \"r1\"\nrole = \"gpu-node\"\n"),
               11, 1, "nodes[1].bmc.url", "required: pipeline 'gpu-node' has the firmware stage");
    // A build without the module asks for no BMC (its run would refuse the
    // stage as not implemented instead).
    LoadOptions without = options();
    without.tables.erase(
        std::remove_if(without.tables.begin(), without.tables.end(),
                       [](const kiln::config::ConfigTable& t) { return t.key == kiln::firmware::kFirmwareTable; }),
        without.tables.end());
    expect_ok(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"gpu-node\"\n", without));
}

TEST_CASE("config: handover takes exactly one of command or webhook", "[config][errors]") {
    expect_one(*load_text(kBase + "[handover]\ncommand = [\"/bin/true\"]\nwebhook = \"https://h/x\"\n"), 6, 1,
               "handover", "expected exactly one of 'command' or 'webhook'");
    expect_one(*load_text(kBase + "[handover]\ntimeout = \"10s\"\n"), 6, 1, "handover",
               "expected exactly one of 'command' or 'webhook'");
    expect_one(*load_text(kBase + "[handover]\ncommand = []\n"), 7, 11, "handover.command", "non-empty argv");
    expect_one(*load_text(kBase + "[handover]\ncommand = [\"/bin/x\", 2]\n"), 7, 22, "handover.command[1]",
               "expected string, found integer");
    expect_one(*load_text(kBase + "[handover]\ncommand = [\"/bin/true\"]\nsecret = \"env:K\"\n"), 8, 10,
               "handover.secret", "only used with 'webhook'");
    auto ok =
        load_text(kBase + "[handover]\nwebhook = \"https://cmdb/hook\"\nsecret = \"env:HOOK_KEY\"\ntimeout = 5\n");
    expect_ok(*ok);
    CHECK(kiln::handover::handover_hook(*ok->result.fleet)->webhook == "https://cmdb/hook");
    CHECK(kiln::handover::handover_hook(*ok->result.fleet)->webhook_secret->reference() == "env:HOOK_KEY");
    CHECK(kiln::handover::handover_hook(*ok->result.fleet)->timeout == 5s);
}

TEST_CASE("config: rules between two keys point at the value written", "[config][errors]") {
    expect_one(*load_text(kBase + "[network.r]\nroce_dscp = 48\n"), 7, 13, "network.r.roce_dscp",
               "expected a DSCP different from cnp_dscp (48)");
    expect_one(*load_text(kBase + "[network.r]\ncnp_dscp = 26\n"), 7, 12, "network.r.cnp_dscp",
               "expected a DSCP different from roce_dscp (26)");
    expect_one(*load_text(kBase + "[network.r]\ncnp_priority = 3\n"), 7, 16, "network.r.cnp_priority",
               "different from lossless_priority (3)");
    expect_one(*load_text(kBase + "[network.r]\necn_min_kb = 2000\n"), 7, 14, "network.r.ecn_min_kb",
               "expected ecn_min_kb < ecn_max_kb (1500)");
    expect_one(*load_text(kBase + "[network.r]\nhost_mtu = 9000\nswitch_mtu = 4000\n"), 8, 14, "network.r.switch_mtu",
               "expected switch_mtu >= host_mtu (9000)");
    expect_one(*load_text(kBase + "[limits]\nbackoff_initial = \"5m\"\n"), 7, 19, "limits.backoff_initial",
               "expected backoff_initial <= backoff_max");
    expect_one(*load_text(kBase + "[vm.v]\nsplit = \"count\"\n"), 7, 9, "vm.v.split",
               "split = \"count\" needs count = N (1..64)");
    expect_one(*load_text(kBase + "[vm.v]\ncount = 2\n"), 7, 9, "vm.v.count", "count is only for split = \"count\"");
}

TEST_CASE("config: every error is reported, sorted by position", "[config][errors]") {
    // Written out of order: nodes before limits in the file, checked after.
    auto l = load_text(kBase +
                       "colour = 1\n[[nodes]]\nname = \"Bad_Name\"\nrack = \"r7\"\nrole = \"reimage\"\n"
                       "bmc = { password = \"plain\" }\n[limits]\nretries = -1\n");
    INFO(all_errors(*l));
    struct Want {
        int line, col;
        std::string key, text;
    };
    const std::vector<Want> want = {
        {6, 1, "racks[0].colour", "unknown key 'colour'"},
        {8, 8, "nodes[0].name", "expected a DNS label"},
        {9, 8, "nodes[0].rack", "no rack 'r7'; defined: r1"},
        {11, 20, "nodes[0].bmc.password", "a literal secret is not allowed"},
        {13, 11, "limits.retries", "expected 0..100, found -1"},
    };
    REQUIRE(l->result.errors.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        const auto& d = l->result.errors[i];
        CHECK(d.pos.line == want[i].line);
        CHECK(d.pos.column == want[i].col);
        CHECK(d.key == want[i].key);
        CHECK_THAT(d.message, Catch::Contains(want[i].text));
    }
    CHECK(all_errors(*l).find("plain") == std::string::npos);
    CHECK_FALSE(l->result.fleet.has_value());
}

TEST_CASE("config: unreadable file and missing pipelines folder", "[config][errors]") {
    auto r = load_fleet("/nonexistent/fleet.toml", options());
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str() == "/nonexistent/fleet.toml:1:1: cannot read file");
    CHECK_FALSE(r.fleet.has_value());
    TempDir dir;
    auto d = load_fleet(dir.path(), options());  // a folder, not a file
    REQUIRE(d.errors.size() == 1);
    CHECK(d.errors[0].str() == dir.path() + ":1:1: cannot read file");
    auto o = options();
    o.pipelines_dir_override.clear();
    auto l = load_text("schema = 1\n[fleet]\nname = \"t\"\npipelines = \"nowhere\"\n", o);
    expect_one(*l, 4, 13, "fleet.pipelines", "pipelines folder '" + l->dir.path() + "/nowhere' does not exist");
    o.default_pipelines_dir = "/nonexistent/pipelines";
    auto m = load_text("schema = 1\n[fleet]\nname = \"t\"\n", o);
    expect_one(*m, 1, 1, "", "pipelines folder '/nonexistent/pipelines' does not exist");
}

TEST_CASE("config: where pipelines come from", "[config][pipelines]") {
    const std::string reimage = slurp(kFixtures + "/pipelines/reimage.toml");
    const std::string fleet = kBase + kNodeA;
    auto o = options();
    o.pipelines_dir_override.clear();
    o.default_pipelines_dir = kFixtures + "/pipelines";
    SECTION("a pipelines/ folder beside the fleet wins over the default") {
        TempDir dir;
        dir.write("pipelines/reimage.toml", reimage);
        auto r = load_fleet(dir.write("fleet.toml", fleet), o);
        for (const auto& e : r.errors) FAIL_CHECK(e.str());
        REQUIRE(r.fleet);
        CHECK(r.fleet->pipelines_dir == dir.path() + "/pipelines");
        CHECK(r.fleet->pipelines.size() == 1);
    }
    SECTION("the default folder when the fleet has none") {
        TempDir dir;
        auto r = load_fleet(dir.write("fleet.toml", fleet), o);
        for (const auto& e : r.errors) FAIL_CHECK(e.str());
        REQUIRE(r.fleet);
        CHECK(r.fleet->pipelines_dir == normal(kFixtures + "/pipelines"));
        CHECK(r.fleet->pipelines.size() == 2);
    }
    SECTION("[fleet].pipelines, relative to the fleet's folder") {
        TempDir dir;
        dir.write("pipelines/other.toml", "schema = 1\nname = \"other\"\nstages = [\"vm\"]\n");
        dir.write("mine/reimage.toml", reimage);
        auto r = load_fleet(dir.write("fleet.toml",
                                      "schema = 1\n[fleet]\nname = \"t\"\npipelines = \"mine\"\n"
                                      "[[racks]]\nname = \"r1\"\n" +
                                          kNodeA),
                            o);
        for (const auto& e : r.errors) FAIL_CHECK(e.str());
        REQUIRE(r.fleet);
        CHECK(r.fleet->pipelines_dir == dir.path() + "/mine");
        CHECK(r.fleet->pipelines.count("other") == 0);
    }
    SECTION("the override wins over everything") {
        TempDir dir;
        dir.write("pipelines/other.toml", "schema = 1\nname = \"other\"\nstages = [\"vm\"]\n");
        o.pipelines_dir_override = kFixtures + "/pipelines";
        auto r = load_fleet(dir.write("fleet.toml", fleet), o);
        for (const auto& e : r.errors) FAIL_CHECK(e.str());
        REQUIRE(r.fleet);
        CHECK(r.fleet->pipelines_dir == normal(kFixtures + "/pipelines"));
    }
    SECTION("a broken pipeline is reported in its file, after the fleet's own errors") {
        TempDir dir;
        const std::string bad =
            dir.write("pipelines/reimage.toml", "schema = 1\nname = \"reimage\"\nstages = [\"vm\", \"smoek\"]\n");
        const std::string path = dir.write("fleet.toml", kBase + "colour = 1\n" + kNodeA);
        auto r = load_fleet(path, o);
        REQUIRE(r.errors.size() == 2);  // and no "no pipeline 'reimage'" for the node
        CHECK(r.errors[0].str() ==
              path + ":6:1: racks[0].colour: unknown key 'colour'; expected one of: name, switches");
        CHECK(r.errors[1].pos.file == bad);
        CHECK(r.errors[1].pos.line == 3);
        CHECK(r.errors[1].pos.column == 17);
        CHECK(r.errors[1].key == "stages[1]");
        CHECK_FALSE(r.fleet.has_value());
    }
}

TEST_CASE("config: the shipped pipelines load", "[config][pipelines]") {
    std::vector<Diagnostic> errs;
    auto gpu = kiln::config::load_pipeline(kShippedPipelines + "/gpu-node.toml", kStages, errs);
    auto re = kiln::config::load_pipeline(kShippedPipelines + "/reimage.toml", kStages, errs);
    for (const auto& e : errs) FAIL_CHECK(e.str());
    REQUIRE(gpu);
    REQUIRE(re);
    CHECK(gpu->name == "gpu-node");
    CHECK_FALSE(gpu->description.empty());
    CHECK(gpu->stages == std::vector<std::string>{"firmware", "network", "image", "vm", "smoke", "handover"});
    CHECK(re->name == "reimage");
    CHECK(re->stages == std::vector<std::string>{"image", "vm", "smoke", "handover"});
    CHECK(re->path == kShippedPipelines + "/reimage.toml");
}

TEST_CASE("config: pipeline files are checked too", "[config][errors][pipelines]") {
    TempDir dir;
    const std::set<std::string> known = {"firmware", "network", "image"};
    auto check = [&](const std::string& name, const std::string& text, int line, int col, const std::string& key,
                     const std::string& msg) {
        std::vector<Diagnostic> errs;
        const std::string path = dir.write(name, text);
        auto p = kiln::config::load_pipeline(path, known, errs);
        INFO(text);
        REQUIRE_FALSE(p.has_value());
        REQUIRE(errs.size() == 1);
        CHECK(errs[0].pos.file == path);
        CHECK(errs[0].pos.line == line);
        CHECK(errs[0].pos.column == col);
        CHECK(errs[0].key == key);
        CHECK_THAT(errs[0].message, Catch::Contains(msg));
    };
    check("a.toml", "schema = 1\nname = \"a\"\nstages = [\"firmware\", \"smoek\"]\n", 3, 23, "stages[1]",
          "no stage named 'smoek'; known: firmware, image, network");
    check("b.toml", "schema = 1\nname = \"bee\"\nstages = [\"image\"]\n", 2, 8, "name",
          "expected \"b\" (the file name), found \"bee\"");
    check("c.toml", "schema = 1\nname = \"c\"\nstages = []\n", 3, 10, "stages", "expected at least one stage");
    check("d.toml", "schema = 1\nname = \"d\"\nstages = [\"image\", \"image\"]\n", 3, 20, "stages[1]",
          "stage 'image' is listed twice");
    check("e.toml", "schema = 1\nname = \"e\"\nstages = [\"image\"]\nwhen = 1\n", 4, 1, "when",
          "unknown key 'when'; expected one of: description, name, schema, stages");
    check("g.toml", "schema = 0\nname = \"g\"\nstages = [\"image\"]\n", 1, 10, "schema", "expected 1, found 0");
    check("h.toml", "schema = 1\nname = \"h\"\n", 1, 1, "stages", "required key is missing");
    check("i.toml", "schema = 1\nname = \"i\"\nstages = \"image\"\n", 3, 10, "stages",
          "expected array of strings, found string");
    check("j.toml", "schema = 1\nname = \"j\"\ndescription = 3\nstages = [\"image\"]\n", 3, 15, "description",
          "expected string, found integer");
    check("k.toml", "schema = 1\nname = \"k\"\nstages = [\"image\"\n", 3, 19, "", "");  // syntax error
    std::vector<Diagnostic> errs;
    auto ok = kiln::config::load_pipeline(
        dir.write("f.toml", "schema = 1\nname = \"f\"\ndescription = \"two\"\nstages = [\"image\", \"network\"]\n"),
        known, errs);
    REQUIRE(ok.has_value());
    CHECK(errs.empty());
    CHECK(ok->name == "f");
    CHECK(ok->description == "two");
    CHECK(ok->stages == std::vector<std::string>{"image", "network"});
}

TEST_CASE("config: durations", "[config]") {
    using kiln::config::parse_duration;
    CHECK(parse_duration("500ms") == 500ms);
    CHECK(parse_duration("90s") == 90s);
    CHECK(parse_duration("15m") == 15min);
    CHECK(parse_duration("2h") == 2h);
    CHECK(parse_duration("1d") == 24h);
    CHECK(parse_duration("30") == 30s);
    CHECK(parse_duration("0") == 0ms);
    CHECK(parse_duration("0ms") == 0ms);
    CHECK_FALSE(parse_duration("").has_value());
    CHECK_FALSE(parse_duration("ms").has_value());
    CHECK_FALSE(parse_duration("1.5h").has_value());
    CHECK_FALSE(parse_duration("-3s").has_value());
    CHECK_FALSE(parse_duration("10x").has_value());
    CHECK_FALSE(parse_duration("1h30m").has_value());
    CHECK_FALSE(parse_duration("3 weeks").has_value());
    CHECK_FALSE(parse_duration("99999999999999999999s").has_value());
    CHECK_FALSE(parse_duration("9223372036854775807d").has_value());  // would overflow
}

TEST_CASE("config: a shared smoke ring and the limits it needs", "[config][errors]") {
    // Lines 6-7: the profile; then two nodes of rack r1 and one of r2.
    const std::string base = "schema = 1\n[fleet]\nname = \"t\"\n[[racks]]\nname = \"r1\"\n";
    auto fleet = [&](const std::string& scope, const std::string& limits, const std::string& uri_b = "") {
        return base + "[[racks]]\nname = \"r2\"\n" + limits + "[smoke.ring]\nscope = \"" + scope + "\"\n" +
               "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"reimage\"\nsmoke = \"ring\"\n" +
               "[[nodes]]\nname = \"b\"\nrack = \"r1\"\nrole = \"reimage\"\nsmoke = \"ring\"\n" + uri_b +
               "[[nodes]]\nname = \"c\"\nrack = \"r2\"\nrole = \"reimage\"\nsmoke = \"ring\"\n";
    };
    auto names = [](const std::vector<const kiln::config::Node*>& ring) {
        std::vector<std::string> out;
        for (const auto* n : ring) out.push_back(n->name);
        return out;
    };
    SECTION("rack: the nodes of one rack; fleet: all of them; node: each alone") {
        auto rack = load_text(fleet("rack", ""));
        expect_ok(*rack);
        const auto& f = *rack->result.fleet;
        CHECK(kiln::smoke::smoke_profiles(f)->at("ring").scope == "rack");
        CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[0])) == std::vector<std::string>{"a", "b"});
        CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[2])) == std::vector<std::string>{"c"});
        // The ring is an input of the smoke stage: a node joining it reruns it.
        auto in = kiln::smoke::smoke_inputs(f, f.nodes[1]);
        CHECK(in["ring"] == nlohmann::json::array({"a", "b"}));
        CHECK(in["scope"] == "rack");

        auto all = load_text(fleet("fleet", ""));
        expect_ok(*all);
        const auto& g = *all->result.fleet;
        CHECK(names(kiln::smoke::smoke_ring(g, g.nodes[2])) == std::vector<std::string>{"a", "b", "c"});

        auto alone = load_text(fleet("node", ""));
        expect_ok(*alone);
        const auto& h = *alone->result.fleet;
        CHECK(names(kiln::smoke::smoke_ring(h, h.nodes[0])) == std::vector<std::string>{"a"});
        // Node rings keep the inputs (and digests) they had before scopes existed.
        CHECK_FALSE(kiln::smoke::smoke_inputs(h, h.nodes[0]).contains("ring"));
    }
    SECTION("a node whose pipeline has no smoke stage is not in the ring") {
        auto l = load_text(fleet("fleet", "") +
                           "[[nodes]]\nname = \"d\"\nrack = \"r2\"\nrole = \"gpu-node\"\n"
                           "smoke = \"ring\"\nbmc = { url = \"https://h\" }\n");
        expect_ok(*l);
        kiln::config::Fleet f = *l->result.fleet;
        CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[0])) == std::vector<std::string>{"a", "b", "c", "d"});
        auto& st = f.pipelines.at("gpu-node").stages;
        st.erase(std::find(st.begin(), st.end(), "smoke"));
        CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[0])) == std::vector<std::string>{"a", "b", "c"});
    }
    SECTION("errors at the scope key") {
        expect_one(*load_text(fleet("rack", "[limits]\nparallel = 1\n")), 11, 9, "smoke.ring.scope",
                   "1 shared smoke ring (2 nodes) need [limits] parallel >= 2 (nodes that reach the stage first "
                   "wait there for the rest), but parallel = 1");
        expect_ok(*load_text(fleet("rack", "[limits]\nparallel = 2\n")));
        expect_one(*load_text(fleet("fleet", "[limits]\nmax_unavailable = 2\n")), 11, 9, "smoke.ring.scope",
                   "(3 nodes) need [limits] max_unavailable >= 3 (or 0), but max_unavailable = 2");
        expect_one(*load_text(fleet("fleet", "[limits]\nper_rack = 1\n")), 11, 9, "smoke.ring.scope",
                   "need [limits] per_rack >= 2 for rack r1, but per_rack = 1");
        expect_one(*load_text(fleet("rack", "", "libvirt_uri = \"qemu+ssh://h2/system\"\n")), 9, 9, "smoke.ring.scope",
                   "the smoke ring of ring spans hypervisors (a on 'qemu:///system', b on 'qemu+ssh://h2/system')");
        // Rings wait side by side: two rings of two (racks r1, r2) leave a
        // free slot only with parallel >= 1 + 1 + 1.
        const std::string two_racks = fleet("rack", "[limits]\nparallel = 2\n") +
                                      "[[nodes]]\nname = \"d\"\nrack = \"r2\"\nrole = \"reimage\"\nsmoke = \"ring\"\n";
        expect_one(*load_text(two_racks), 11, 9, "smoke.ring.scope",
                   "2 shared smoke rings (4 nodes) need [limits] parallel >= 3");
        // A scope it does not know: that error alone, no ring follows from it.
        expect_one(*load_text(fleet("pod", "[limits]\nparallel = 1\n")), 11, 9, "smoke.ring.scope",
                   "expected one of node, rack, fleet, found \"pod\"");
    }
}

TEST_CASE("config: a smoke profile's relative floor and what it does", "[config][errors]") {
    // Lines 6-8: the profile.
    auto with = [](const std::string& keys) { return kBase + "[smoke.s]\n" + keys + kNodeA; };
    auto ok = load_text(with("relative_floor = 0.9\nrelative_verdict = \"warn\"\n"));
    expect_ok(*ok);
    CHECK(kiln::smoke::smoke_profiles(*ok->result.fleet)->at("s").relative_floor == 0.9);
    CHECK(kiln::smoke::smoke_profiles(*ok->result.fleet)->at("s").relative_verdict == "warn");
    auto plain = load_text(with(""));
    expect_ok(*plain);
    CHECK(kiln::smoke::smoke_profiles(*plain->result.fleet)->at("s").relative_floor == 0);
    CHECK(kiln::smoke::smoke_profiles(*plain->result.fleet)->at("s").relative_verdict == "fail");
    expect_one(*load_text(with("relative_floor = 1.5\n")), 7, 18, "smoke.s.relative_floor",
               "must be a fraction of the median between 0 and 1");
    expect_one(*load_text(with("relative_verdict = \"ignore\"\n")), 7, 20, "smoke.s.relative_verdict", "warn");
}

TEST_CASE("config: a smoke profile shapes the RDMA writes, and only a profile that does changes its inputs",
          "[config][errors]") {
    // Lines 6-8: the profile; node a runs it.
    auto with = [](const std::string& keys) { return kBase + "[smoke.s]\n" + keys + kNodeA + "smoke = \"s\"\n"; };
    auto ok = load_text(with("rdma_bytes = 16384\nrdma_iterations = 50\nrdma_pair_timeout = \"90s\"\n"));
    expect_ok(*ok);
    const auto& f = *ok->result.fleet;
    const auto& p = kiln::smoke::smoke_profiles(f)->at("s");
    CHECK(p.rdma_bytes == 16384);
    CHECK(p.rdma_iterations == 50);
    CHECK(p.rdma_pair_timeout == std::chrono::seconds(90));
    auto in = kiln::smoke::smoke_inputs(f, f.nodes[0]);
    CHECK(in["rdma"] == nlohmann::json({{"bytes", 16384}, {"iterations", 50}, {"pair_timeout_ms", 90000}}));

    // Unset: kiln-smoke's defaults, and the inputs (and digest) profiles had before.
    auto plain = load_text(with(""));
    expect_ok(*plain);
    const auto& g = *plain->result.fleet;
    CHECK_FALSE(kiln::smoke::smoke_profiles(g)->at("s").rdma_bytes);
    CHECK_FALSE(kiln::smoke::smoke_inputs(g, g.nodes[0]).contains("rdma"));
    // One key alone is the only one carried.
    auto one = load_text(with("rdma_iterations = 5\n"));
    expect_ok(*one);
    CHECK(kiln::smoke::smoke_inputs(*one->result.fleet, one->result.fleet->nodes[0])["rdma"] ==
          nlohmann::json({{"iterations", 5}}));

    expect_one(*load_text(with("rdma_bytes = 0\n")), 7, 14, "smoke.s.rdma_bytes", "1");
    expect_one(*load_text(with("rdma_iterations = 4\n")), 7, 19, "smoke.s.rdma_iterations", "5");
    expect_one(*load_text(with("rdma_pair_timeout = \"500ms\"\n")), 7, 21, "smoke.s.rdma_pair_timeout",
               "must be at least 1s");
    expect_one(*load_text(with("rdma_bytes = \"64k\"\n")), 7, 14, "smoke.s.rdma_bytes", "integer");
}

TEST_CASE("config: the store table names a PostgreSQL journal, a password in its URL is refused masked",
          "[config][errors]") {
    auto ok = load_text(kBase +
                        "[store]\nurl = \"postgresql://kiln@db:5432/kiln?sslmode=require\"\n"
                        "password = \"file:pg-pass\"\n");
    expect_ok(*ok);
    const auto& st = ok->result.fleet->store;
    REQUIRE(st.has_value());
    CHECK(st->url == "postgresql://kiln@db:5432/kiln?sslmode=require");
    REQUIRE(st->password.has_value());
    CHECK(st->password->reference() == "file:pg-pass");
    CHECK_FALSE(load_text(kBase)->result.fleet->store.has_value());

    auto in_url = load_text(kBase + "[store]\nurl = \"postgresql://kiln:hunter2@db/kiln\"\n");
    expect_one(*in_url, 7, 7, "store.url", "postgresql://kiln:***@db/kiln carries a password");
    CHECK(all_errors(*in_url).find("hunter2") == std::string::npos);
    expect_one(*load_text(kBase + "[store]\nurl = \"postgresql://db/kiln?password=hunter2\"\n"), 7, 7, "store.url",
               "password=***");
    expect_one(*load_text(kBase + "[store]\nurl = \"mysql://db/kiln\"\n"), 7, 7, "store.url",
               "expected a store URL postgresql://");
    auto literal = load_text(kBase + "[store]\nurl = \"postgresql://db/kiln\"\npassword = \"hunter2\"\n");
    expect_one(*literal, 8, 12, "store.password", "a literal secret is not allowed");
    CHECK(all_errors(*literal).find("hunter2") == std::string::npos);
    expect_one(*load_text(kBase + "[store]\npassword = \"env:X\"\n"), 6, 1, "store.url", "");
}
