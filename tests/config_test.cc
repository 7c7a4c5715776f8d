// Fleet config loading: the values of a full fleet, and every error class
// with its exact FILE:LINE:COL and key.
#include <catch2/catch.hpp>

#include <filesystem>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/stage_registry.h"
#include "tests/support/temp_dir.h"

using kiln::config::Diagnostic;
using kiln::config::LoadOptions;
using kiln::config::load_fleet;
using kiln::test::TempDir;
using namespace std::chrono_literals;

namespace {

const std::string kFixtures = KILN_TEST_FIXTURES "/config";

LoadOptions options() {
    LoadOptions o;
    auto names = kiln::engine::StageRegistry::product_stage_names();
    o.known_stages = {names.begin(), names.end()};
    o.pipelines_dir_override = kFixtures + "/pipelines";
    return o;
}

// Lines 1-5 of every error case: a valid fleet with one rack.
const std::string kBase = "schema = 1\n[fleet]\nname = \"t\"\n[[racks]]\nname = \"r1\"\n";
const std::string kNodeA = "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"reimage\"\n";  // lines 6-9

struct Loaded {
    TempDir dir;
    std::string path;
    kiln::config::LoadResult result;
};

std::unique_ptr<Loaded> load_text(const std::string& toml, LoadOptions o = options()) {
    auto l = std::make_unique<Loaded>();
    l->path = l->dir.write("fleet.toml", toml);
    l->result = load_fleet(l->path, o);
    return l;
}

// Exactly one diagnostic, at line:col, for key, containing text.
void expect_one(const Loaded& l, int line, int col, const std::string& key, const std::string& text) {
    std::string all;
    for (const auto& d : l.result.errors) all += d.str() + "\n";
    INFO(all);
    REQUIRE(l.result.errors.size() == 1);
    const Diagnostic& d = l.result.errors.front();
    CHECK(d.pos.file == l.path);
    CHECK(d.pos.line == line);
    CHECK(d.pos.column == col);
    CHECK(d.key == key);
    CHECK_THAT(d.message, Catch::Contains(text));
    CHECK_FALSE(l.result.fleet.has_value());
    CHECK(d.str().rfind(l.path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": ", 0) == 0);
}

}  // namespace

TEST_CASE("config: a full fleet loads with every value", "[config]") {
    auto o = options();
    o.pipelines_dir_override.clear();  // the fleet names its own folder
    auto r = load_fleet(kFixtures + "/full.toml", o);
    for (const auto& d : r.errors) FAIL_CHECK(d.str());
    REQUIRE(r.fleet.has_value());
    const auto& f = *r.fleet;
    CHECK(f.name == "full");
    CHECK(f.sha256.size() == 64);
    CHECK(f.pipelines_dir == std::filesystem::path(kFixtures + "/pipelines").lexically_normal().string());
    CHECK(f.pipelines.size() == 2);
    CHECK(f.pipelines.at("gpu-node").stages.size() == 6);
    CHECK(f.limits.parallel == 16);
    CHECK(f.limits.per_rack == 4);
    CHECK(f.limits.max_unavailable == 3);
    CHECK(f.limits.retries == 5);
    CHECK(f.limits.backoff_initial == 500ms);
    CHECK(f.limits.backoff_max == 1min);
    CHECK(f.limits.timeout_for("firmware") == 2h);
    CHECK(f.limits.timeout_for("smoke") == 1200s);
    CHECK(f.limits.timeout_for("vm") == 45min);
    REQUIRE(f.switches.size() == 2);
    CHECK(f.find_switch("leaf-1")->os == "sonic");
    CHECK(f.find_switch("leaf-1")->password->reference() == "env:KILN_SWITCH_PASSWORD");
    CHECK_FALSE(f.find_switch("leaf-2")->password.has_value());
    CHECK(f.find_rack("r1")->switches == std::vector<std::string>{"leaf-1", "leaf-2"});
    const auto& fw = f.firmware.at("h100-2026q4");
    REQUIRE(fw.components.size() == 2);
    CHECK(fw.components[0].sha256 == "ab4c7f9d3e2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c");
    CHECK(fw.components[0].artifact ==
          (std::filesystem::path(kFixtures) / "artifacts/bios-2.4.1.bin").lexically_normal().string());
    CHECK(fw.components[1].artifact == "/srv/fw/bmc-7.10.bin");
    const auto& bios = f.bios.at("gpu");
    CHECK(bios.sriov == true);
    CHECK(bios.acs == false);
    CHECK(bios.extra.at("NumaNodesPerSocket") == "1");
    CHECK(bios.extra.at("Turbo") == "false");
    const auto& net = f.network.at("roce");
    CHECK(net.ecn_min_kb == 100);
    CHECK(net.pfc_watchdog_action == "forward");
    CHECK(net.pfc_watchdog_restoration_ms == 300);
    CHECK(net.buffer_policy == "lossless");  // default
    CHECK(f.vm.at("whole").split == "numa");
    CHECK_FALSE(f.vm.at("whole").hugepages);
    CHECK(f.smoke.at("default").thresholds.at("gemm_tflops") == Approx(300));
    CHECK(f.smoke.at("default").timeout == 20min);
    REQUIRE(f.handover.has_value());
    CHECK(f.handover->command == std::vector<std::string>{"/usr/local/bin/cmdb-mark", "--ready"});
    REQUIRE(f.nodes.size() == 2);
    const auto& n1 = f.nodes[0];
    CHECK(n1.role == "gpu-node");          // from [defaults]
    CHECK(n1.network == "roce");
    CHECK(n1.bmc.url == "https://127.0.0.1:8443");
    CHECK(n1.bmc.username == "root");      // merged from defaults.bmc
    CHECK(n1.bmc.password->reference() == "env:KILN_BMC_PASSWORD");
    CHECK_FALSE(n1.bmc.verify_tls);
    CHECK(n1.bmc.fingerprint == "aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899");
    CHECK(n1.labels.at("slot") == "u12");
    CHECK(n1.pos.line == 107);
    const auto& n2 = f.nodes[1];
    CHECK(n2.role == "reimage");
    CHECK(n2.bmc.verify_tls);
    CHECK(n2.bmc.password->kind() == kiln::Secret::Kind::File);
}

TEST_CASE("config: node sections hash secrets by reference only", "[config]") {
    auto o = options();
    o.pipelines_dir_override.clear();
    auto r = load_fleet(kFixtures + "/full.toml", o);
    REQUIRE(r.fleet);
    auto j = kiln::config::node_section_json(*r.fleet, r.fleet->nodes[0], "firmware");
    CHECK(j["bmc"]["password"] == "env:KILN_BMC_PASSWORD");
    CHECK(j["firmware"].size() == 2);
    CHECK(j["bios"]["acs"] == false);
    auto n = kiln::config::node_section_json(*r.fleet, r.fleet->nodes[0], "network");
    CHECK(n["switches"].size() == 2);
    CHECK(n["profile"]["roce_dscp"] == 26);
}

TEST_CASE("config: a TOML syntax error names its position", "[config][errors]") {
    auto l = load_text("schema = 1\n[fleet]\nname = \n");
    REQUIRE(l->result.errors.size() == 1);
    const auto& d = l->result.errors.front();
    CHECK(d.pos.line == 3);
    CHECK(d.key.empty());
    CHECK(d.str().rfind(l->path + ":3:", 0) == 0);
}

TEST_CASE("config: unknown keys, at the key, with what was expected", "[config][errors]") {
    expect_one(*load_text("schema = 1\ncolour = \"blue\"\n[fleet]\nname = \"t\"\n"), 2, 1, "colour",
               "unknown key 'colour'; expected one of:");
    expect_one(*load_text(kBase + "colour = \"blue\"\n"), 6, 1, "racks[0].colour", "expected one of: name, switches");
    expect_one(*load_text(kBase + "[limits]\nparralel = 4\n"), 7, 1, "limits.parralel",
               "expected one of: backoff_initial, backoff_max, max_unavailable, parallel");
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"https://h\", passwd = \"env:X\" }\n"), 10, 28,
               "nodes[0].bmc.passwd", "unknown key 'passwd'");
}

TEST_CASE("config: wrong types and out-of-range values", "[config][errors]") {
    expect_one(*load_text(kBase + "[limits]\nparallel = \"many\"\n"), 7, 12, "limits.parallel",
               "expected integer, found string");
    expect_one(*load_text(kBase + "[network.roce]\nlossless_priority = 9\n"), 7, 21,
               "network.roce.lossless_priority", "expected 0..7, found 9");
    expect_one(*load_text(kBase + "[vm.small]\nhugepages = \"yes\"\n"), 7, 13, "vm.small.hugepages",
               "expected boolean, found string");
    expect_one(*load_text("schema = 2\n[fleet]\nname = \"t\"\n"), 1, 10, "schema", "expected 1");
    expect_one(*load_text(kBase + "[switches.s1]\nos = \"junos\"\naddress = \"x\"\n"), 7, 6, "switches.s1.os",
               "expected one of sonic, nvue, eos");
}

TEST_CASE("config: missing required keys are reported at their table", "[config][errors]") {
    expect_one(*load_text(kBase + "[[nodes]]\nrack = \"r1\"\nrole = \"reimage\"\n"), 6, 1, "nodes[0].name",
               "required key is missing");
    expect_one(*load_text("schema = 1\n[fleet]\npipelines = \"p\"\n"), 2, 1, "fleet.name", "required key is missing");
}

TEST_CASE("config: duplicate node and rack names point at the second", "[config][errors]") {
    auto l = load_text(kBase + kNodeA + kNodeA);
    expect_one(*l, 11, 8, "nodes[1].name", "duplicate node name 'a' (first at " + l->path + ":7:8)");
    auto r = load_text(kBase + "[[racks]]\nname = \"r1\"\n");
    expect_one(*r, 7, 8, "racks[1].name", "duplicate rack name 'r1' (first at " + r->path + ":5:8)");
}

TEST_CASE("config: references to undefined racks, pipelines, profiles, switches", "[config][errors]") {
    expect_one(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r9\"\nrole = \"reimage\"\n"), 8, 8,
               "nodes[0].rack", "no rack 'r9'; defined: r1");
    expect_one(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"nope\"\n"), 9, 8,
               "nodes[0].role", "no pipeline 'nope'");
    expect_one(*load_text(kBase + kNodeA + "network = \"fast\"\n"), 10, 11, "nodes[0].network",
               "no network profile 'fast'; defined: (none)");
    expect_one(*load_text(kBase + "[images.g]\nrecipe = \"x.toml\"\n" + kNodeA + "image = \"h\"\n"), 12, 9,
               "nodes[0].image", "no image profile 'h'; defined: g");
    expect_one(*load_text(kBase + "[defaults]\nsmoke = \"quick\"\n"), 7, 9, "defaults.smoke",
               "no smoke profile 'quick'");
    expect_one(*load_text(kBase + "[[racks]]\nname = \"r2\"\nswitches = [\"leaf-9\"]\n"), 8, 13,
               "racks[1].switches[0]", "no switch 'leaf-9'; defined: (none)");
}

TEST_CASE("config: a literal secret is an error that never shows the value", "[config][errors][secrets]") {
    auto l = load_text(kBase + kNodeA + "bmc = { url = \"https://h\", password = \"hunter2\" }\n");
    expect_one(*l, 10, 39, "nodes[0].bmc.password", "a literal secret is not allowed");
    CHECK(l->result.errors.front().str().find("hunter2") == std::string::npos);
    auto s = load_text(kBase + "[switches.s1]\nos = \"eos\"\naddress = \"h\"\npassword = \"admin123\"\n");
    expect_one(*s, 9, 12, "switches.s1.password", "literal secret");
    CHECK(s->result.errors.front().str().find("admin123") == std::string::npos);
    auto e = load_text(kBase + kNodeA + "bmc = { url = \"https://h\", password = \"env:\" }\n");
    expect_one(*e, 10, 39, "nodes[0].bmc.password", "expected env:NAME");
}

TEST_CASE("config: bad durations, digests, URLs and fingerprints", "[config][errors]") {
    expect_one(*load_text(kBase + "[limits]\nbackoff_initial = \"soon\"\n"), 7, 19, "limits.backoff_initial",
               "expected a duration such as");
    expect_one(*load_text(kBase + "[firmware.f]\n[[firmware.f.components]]\nname = \"BIOS\"\nversion = \"1\"\n"
                                  "artifact = \"a.bin\"\nsha256 = \"abc\"\n"),
               11, 10, "firmware.f.components[0].sha256", "expected 64 hex digits, found 3 characters");
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"ftp://h\" }\n"), 10, 15, "nodes[0].bmc.url",
               "expected an http:// or https:// URL");
    expect_one(*load_text(kBase + kNodeA + "bmc = { url = \"https://h\", fingerprint = \"12ab\" }\n"), 10, 42,
               "nodes[0].bmc.fingerprint", "64 hex digits");
    expect_one(*load_text(kBase + "[limits.timeouts]\nfirmwares = \"1h\"\n"), 7, 1, "limits.timeouts.firmwares",
               "no stage named 'firmwares'");
}

TEST_CASE("config: a node that runs the firmware stage needs a BMC URL", "[config][errors]") {
    expect_one(*load_text(kBase + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"gpu-node\"\n"), 6, 1,
               "nodes[0].bmc.url", "required: pipeline 'gpu-node' has the firmware stage");
}

TEST_CASE("config: handover takes exactly one of command or webhook", "[config][errors]") {
    expect_one(*load_text(kBase + "[handover]\ncommand = [\"/bin/true\"]\nwebhook = \"https://h/x\"\n"), 6, 1,
               "handover", "expected exactly one of 'command' or 'webhook'");
    expect_one(*load_text(kBase + "[handover]\ncommand = []\n"), 7, 11, "handover.command", "non-empty argv");
}

TEST_CASE("config: network profile consistency", "[config][errors]") {
    expect_one(*load_text(kBase + "[network.r]\nroce_dscp = 48\n"), 6, 1, "network.r.cnp_dscp",
               "different from roce_dscp");
    expect_one(*load_text(kBase + "[network.r]\nhost_mtu = 9000\nswitch_mtu = 4000\n"), 6, 1,
               "network.r.switch_mtu", "expected switch_mtu >= host_mtu");
}

TEST_CASE("config: every error is reported, sorted by position", "[config][errors]") {
    auto l = load_text(kBase + "colour = 1\n[limits]\nretries = -1\n[[nodes]]\nname = \"Bad_Name\"\nrack = \"r7\"\n"
                               "role = \"reimage\"\n");
    std::vector<int> lines;
    for (const auto& d : l->result.errors) lines.push_back(d.pos.line);
    REQUIRE(lines == std::vector<int>{6, 8, 10, 11});
    CHECK_THAT(l->result.errors[2].message, Catch::Contains("DNS label"));
    CHECK_FALSE(l->result.fleet.has_value());
}

TEST_CASE("config: unreadable file and missing pipelines folder", "[config][errors]") {
    auto r = load_fleet("/nonexistent/fleet.toml", options());
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str() == "/nonexistent/fleet.toml:1:1: cannot read file");
    auto o = options();
    o.pipelines_dir_override.clear();
    auto l = load_text("schema = 1\n[fleet]\nname = \"t\"\npipelines = \"nowhere\"\n", o);
    expect_one(*l, 4, 13, "fleet.pipelines", "does not exist");
}

TEST_CASE("config: pipeline files are checked too", "[config][errors][pipelines]") {
    TempDir dir;
    const std::set<std::string> known = {"firmware", "network", "image"};
    auto check = [&](const std::string& name, const std::string& text, int line, int col, const std::string& key,
                     const std::string& msg) {
        std::vector<Diagnostic> errs;
        auto p = kiln::config::load_pipeline(dir.write(name, text), known, errs);
        INFO(text);
        REQUIRE_FALSE(p.has_value());
        REQUIRE(errs.size() == 1);
        CHECK(errs[0].pos.line == line);
        CHECK(errs[0].pos.column == col);
        CHECK(errs[0].key == key);
        CHECK_THAT(errs[0].message, Catch::Contains(msg));
    };
    check("a.toml", "schema = 1\nname = \"a\"\nstages = [\"firmware\", \"smoek\"]\n", 3, 23, "stages[1]",
          "no stage named 'smoek'");
    check("b.toml", "schema = 1\nname = \"bee\"\nstages = [\"image\"]\n", 2, 8, "name", "expected \"b\" (the file name)");
    check("c.toml", "schema = 1\nname = \"c\"\nstages = []\n", 3, 10, "stages", "at least one stage");
    check("d.toml", "schema = 1\nname = \"d\"\nstages = [\"image\", \"image\"]\n", 3, 20, "stages[1]", "listed twice");
    check("e.toml", "schema = 1\nname = \"e\"\nstages = [\"image\"]\nwhen = 1\n", 4, 1, "when", "unknown key");
    std::vector<Diagnostic> errs;
    auto ok = kiln::config::load_pipeline(dir.write("f.toml", "schema = 1\nname = \"f\"\nstages = [\"image\", \"network\"]\n"),
                                          known, errs);
    REQUIRE(ok.has_value());
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
    CHECK_FALSE(parse_duration("").has_value());
    CHECK_FALSE(parse_duration("1.5h").has_value());
    CHECK_FALSE(parse_duration("-3s").has_value());
    CHECK_FALSE(parse_duration("3 weeks").has_value());
    CHECK_FALSE(parse_duration("99999999999999999999s").has_value());
}
