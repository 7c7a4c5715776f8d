// `kiln evidence` end to end: the real kiln binary against kiln-bmc serving
// a copy of the DMTF rackmount mockup, a smoke result with a fault
// localisation, a VM serial log and a SQLite journal on disk. The BMC
// password (env: in the fleet) is planted in a SEL entry and in the serial
// log, so a bundle that did not scrub would carry it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "firmware/redfish/session_pool.h"
#include "pipelines/smoke/smoke_record.h"
#include "pipelines/smoke/stage/smoke_stage.h"
#include "provisioner/cli/product_stages.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/core/command.h"
#include "provisioner/core/sha256.h"
#include "provisioner/engine/cancel.h"
#include "provisioner/engine/stage_registry.h"
#include "provisioner/evidence/bmc_evidence.h"
#include "provisioner/evidence/evidence_bundle.h"
#include "provisioner/evidence/quarantine_evidence.h"
#include "provisioner/evidence/secret_scrub.h"
#include "provisioner/journal/open_store.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/support/temp_dir.h"

using namespace kiln;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Test data only: reaches kiln through the environment, as a fleet's would.
const std::string kSecret = "Ev1d\"s3cret-9xQ";
constexpr const char* kSecretEnv = "KILN_EVIDENCE_TEST_BMC_PASSWORD";
constexpr const char* kNode = "lab-gpu-07";

std::string json_escaped(const std::string& s) {
    auto d = json(s).dump();
    return d.substr(1, d.size() - 2);
}

// A copy of the DMTF mockup whose second SEL entry quotes the password, as
// a careless BMC or operator might.
std::string planted_mockup(const test::TempDir& dir) {
    const fs::path to = fs::path(dir.path()) / "mockup";
    fs::copy(bmc::test::mockup_path("dmtf-public-rackmount1"), to, fs::copy_options::recursive);
    const auto entries = to / "Systems/437XR1138R2/LogServices/Log1/Entries/index.json";
    json doc = json::parse(test::read_file(entries.string()));
    doc["Members"][1]["Message"] = "Temperature threshold exceeded; service login " + kSecret;
    std::ofstream(entries) << doc.dump(2);
    return to.string();
}

std::string write_fleet(const test::TempDir& dir, const std::string& bmc_url) {
    setenv(kSecretEnv, kSecret.c_str(), 1);
    dir.write("pipelines/gpu.toml", "schema = 1\nname = \"gpu\"\nstages = [\"smoke\", \"handover\"]\n");
    return dir.write("fleet.toml",
                     "schema = 1\n[fleet]\nname = \"evtest\"\npipelines = \"pipelines\"\n"
                     "[[racks]]\nname = \"r1\"\n"
                     "[[nodes]]\nname = \"" +
                         std::string(kNode) +
                         "\"\nrack = \"r1\"\nrole = \"gpu\"\n"
                         "bmc = { url = \"" +
                         bmc_url + "\", username = \"admin\", password = \"env:" + kSecretEnv + "\" }\n");
}

// What the smoke stage leaves for a node a shared ring's search named.
void write_quarantine_state(const test::TempDir& dir) {
    json failed = json::array({{{"vm", "lab-gpu-07-vm0"},
                                {"name", "allreduce_busbw_gbps"},
                                {"figure", 3.1},
                                {"threshold", 8.0},
                                {"unit", "GB/s"},
                                {"compare", ">="}},
                               {{"vm", "lab-gpu-07-vm0"},
                                {"name", "fault_localisation"},
                                {"detail", "every ring without lab-gpu-07 passes"}}});
    json runs = json::array();
    for (const auto& members : {json::array({"lab-gpu-06", "lab-gpu-07"}), json::array({"lab-gpu-05", "lab-gpu-06"}),
                                json::array({"lab-gpu-07"})})
        runs.push_back({{"members", members}, {"figure", members.size() == 1 ? 2.9 : 9.5}});
    json result = {
        {"node", kNode},
        {"verdict", "fail"},
        {"failed", failed},
        {"localisation",
         {{"suspects", {kNode}}, {"cleared", {"lab-gpu-05", "lab-gpu-06"}}, {"runs", runs}, {"complete", true}}},
        {"vms", json::array({{{"vm", "lab-gpu-07-vm0"},
                              {"rank", 0},
                              {"exit_code", 1},
                              {"report", {{"backend", "cpu"}, {"checks", json::array()}}}}})}};
    dir.write(std::string(".kiln/vm/") + kNode + "/lab-gpu-07-vm0.serial.log",
              "[    0.000000] Linux version 6.1\nkiln-ready lab-gpu-07-vm0\nlogin: root password " + kSecret + "\n");
    journal::StoreSpec spec;
    spec.sqlite_path = dir.path() + "/.kiln/journal.db";
    auto store = journal::open_store(spec);
    REQUIRE(store);
    auto run = (*store)->begin_run({"apply", dir.path() + "/fleet.toml", "", "test"});
    REQUIRE(run);
    journal::StageRecord rec;
    rec.run_id = *run;
    rec.node = kNode;
    rec.stage = "smoke";
    rec.input_hash = "h1";
    rec.outcome = "quarantined";
    rec.error = "failed checks: lab-gpu-07-vm0 allreduce_busbw_gbps 3.1 < 8 GB/s";
    rec.started_ms = journal::now_ms();
    rec.ended_ms = rec.started_ms + 1;
    REQUIRE((*store)->record_stage(rec));
    REQUIRE((*store)->put_record({*run, kNode, "smoke", smoke::kResultKind, smoke::kResultSchema, result.dump(), 0}));
    REQUIRE((*store)->end_run(*run, "failed"));
}

// The smoke result write_quarantine_state published, as the journal has it.
json published_result(const test::TempDir& dir) {
    journal::StoreSpec spec;
    spec.sqlite_path = dir.path() + "/.kiln/journal.db";
    auto store = journal::open_store(spec);
    REQUIRE(store);
    auto rec = (*store)->latest_record(kNode, smoke::kResultKind);
    REQUIRE(rec);
    REQUIRE(*rec);
    return json::parse((*rec)->body);
}

CommandResult run(std::vector<std::string> argv, const std::string& cwd = "") {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.cwd = cwd;
    spec.env = {{kSecretEnv, kSecret}};
    spec.timeout = std::chrono::seconds(120);
    auto r = ProcessRunner().run(spec);
    REQUIRE(r);
    return *r;
}

// The archive unpacked: path inside -> bytes.
std::map<std::string, std::string> unpack(const std::string& archive, const test::TempDir& dir) {
    const std::string to = dir.path() + "/unpacked";
    fs::create_directories(to);
    auto r = run({"tar", "-xzf", archive, "-C", to});
    REQUIRE(r.success());
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(to))
        if (e.is_regular_file()) files[fs::relative(e.path(), to).string()] = test::read_file(e.path().string());
    return files;
}

const json& part(const json& manifest, const std::string& name) {
    for (const auto& p : manifest["parts"])
        if (p["name"] == name) return p;
    FAIL("no part " << name << " in the manifest");
    throw std::logic_error("unreachable");
}

void check_no_secret(const std::map<std::string, std::string>& files) {
    const std::string basic = "admin:" + kSecret;
    for (const auto& [path, text] : files) {
        INFO(path);
        CHECK(text.find(kSecret) == std::string::npos);
        CHECK(text.find(json_escaped(kSecret)) == std::string::npos);
        CHECK(text.find("s3cret-9xQ") == std::string::npos);  // any form that kept its tail
    }
}

}  // namespace

TEST_CASE(
    "a quarantined node's bundle holds the BMC's SEL, the checks, the localisation runs, the console and "
    "the history, and no secret") {
    test::TempDir dir;
    bmc::test::BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", planted_mockup(dir), "--port", "0"}, {{"KILN_BMC_PASSWORD", kSecret}}));
    const auto fleet = write_fleet(dir, bmc.url());
    write_quarantine_state(dir);
    const std::string out = dir.path() + "/out/lab-gpu-07.tar.gz";

    auto r = run({KILN_BINARY, "evidence", fleet, kNode, "--out", out, "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json printed = json::parse(r.out);
    CHECK(printed["archive"] == out);
    CHECK(r.out.find("s3cret-9xQ") == std::string::npos);
    CHECK(r.err.find("s3cret-9xQ") == std::string::npos);

    auto files = unpack(out, dir);
    const std::string top = std::string(kNode) + "-evidence/";
    REQUIRE(files.count(top + "manifest.json"));
    const json manifest = json::parse(files[top + "manifest.json"]);
    CHECK(manifest["node"] == kNode);

    // Every file is listed with its digest, and every listed file is there.
    std::set<std::string> listed;
    for (const auto& f : manifest["files"]) {
        const std::string path = top + f["path"].get<std::string>();
        listed.insert(path);
        REQUIRE(files.count(path));
        CHECK(sha256_hex(files[path]) == f["sha256"]);
        CHECK_FALSE(f["source"].get<std::string>().empty());
    }
    for (const auto& [path, text] : files)
        if (path != top + "manifest.json") CHECK(listed.count(path));

    // SEL entries as kiln-bmc served them, the planted one redacted.
    const auto sel_path = top + "bmc/log_services/Systems-437XR1138R2-Log1.json";
    REQUIRE(files.count(sel_path));
    const json sel = json::parse(files[sel_path]);
    REQUIRE(sel["entries"].size() == 2);
    CHECK(sel["entries"][0]["EntryType"] == "SEL");
    CHECK(sel["entries"][0]["MessageId"] == "0x592A28");
    CHECK(sel["entries"][1]["Message"] == "Temperature threshold exceeded; service login [redacted]");
    CHECK(files.count(top + "bmc/log_services/Managers-BMC-Log.json"));
    CHECK(part(manifest, "bmc.log_services")["status"] == "included");
    const json tasks = json::parse(files.at(top + "bmc/tasks.json"));
    CHECK(tasks["tasks"][0]["Id"] == "545");
    CHECK(tasks["tasks"][0]["Messages"][0]["MessageId"] == "Base.1.0.PropertyNotWriteable");
    const json parts = json::parse(files.at(top + "bmc/parts.json"));
    CHECK(parts["chassis"][0]["SerialNumber"] == "437XR1138R2");
    const json fw = json::parse(files.at(top + "bmc/firmware_inventory.json"));
    CHECK(fw.dump().find("P79 v1.45") != std::string::npos);

    // The failing checks and every localisation run, from the smoke stage's
    // record in the journal.
    for (const auto& f : manifest["files"])
        if (f["path"] == "smoke/result.json")
            CHECK(f["source"].get<std::string>().rfind("journal (smoke.result record, run 1, schema 1)", 0) == 0);
    const json failed = json::parse(files.at(top + "smoke/failed_checks.json"));
    CHECK(failed["failed"][0]["name"] == "allreduce_busbw_gbps");
    const json loc = json::parse(files.at(top + "smoke/localisation.json"));
    CHECK(loc["runs"].size() == 3);
    CHECK(loc["suspects"] == json::array({kNode}));

    // The console, with the planted password gone.
    const auto& serial = files.at(top + "vm/lab-gpu-07-vm0.serial.log");
    CHECK(serial.find("kiln-ready lab-gpu-07-vm0") != std::string::npos);
    CHECK(serial.find("password [redacted]") != std::string::npos);

    // The journal's history of the node.
    const json history = json::parse(files.at(top + "journal/history.json"));
    CHECK(history.dump().find("quarantined") != std::string::npos);
    CHECK(history.dump().find("allreduce_busbw_gbps 3.1") != std::string::npos);

    // A CPU-path node: no NVML state, said so rather than invented.
    CHECK_FALSE(files.count(top + "gpu/nvml.json"));
    CHECK(part(manifest, "gpu.nvml")["status"].get<std::string>().rfind("unavailable: ", 0) == 0);

    CHECK(manifest["secret_scan"]["redactions"].get<int>() >= 2);
    check_no_secret(files);
}

TEST_CASE("an unreachable BMC gives a bundle with the BMC part marked unavailable") {
    test::TempDir dir;
    const auto fleet = write_fleet(dir, "http://127.0.0.1:1");  // nothing listens on port 1
    write_quarantine_state(dir);
    const std::string out = dir.path() + "/b.tar.gz";
    auto r = run({KILN_BINARY, "evidence", fleet, kNode, "--out", out});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("! bmc.log_services: unavailable: cannot read the BMC at http://127.0.0.1:1") !=
          std::string::npos);
    auto files = unpack(out, dir);
    const std::string top = std::string(kNode) + "-evidence/";
    const json manifest = json::parse(files.at(top + "manifest.json"));
    for (const char* p : {"bmc.log_services", "bmc.tasks", "bmc.parts", "bmc.firmware"})
        CHECK(part(manifest, p)["status"].get<std::string>().rfind("unavailable: cannot read the BMC", 0) == 0);
    CHECK(part(manifest, "smoke.failed_checks")["status"] == "included");
    CHECK(part(manifest, "smoke.localisation")["status"] == "included");
    CHECK(part(manifest, "journal.history")["status"] == "included");
    CHECK(files.count(top + "smoke/localisation.json"));
    check_no_secret(files);
}

TEST_CASE("an unknown node is refused by name and nothing is written") {
    test::TempDir dir;
    const auto fleet = write_fleet(dir, "http://127.0.0.1:1");
    const std::string out = dir.path() + "/out/x.tar.gz";
    auto r = run({KILN_BINARY, "evidence", fleet, "lab-gpu-99", "--out", out});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("no node 'lab-gpu-99'") != std::string::npos);
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(dir.path() + "/out"));
}

TEST_CASE("an --out that is a folder is refused and leaves nothing behind") {
    test::TempDir dir;
    const auto fleet = write_fleet(dir, "http://127.0.0.1:1");
    write_quarantine_state(dir);
    fs::create_directories(dir.path() + "/folder");
    auto r = run({KILN_BINARY, "evidence", fleet, kNode, "--out", dir.path() + "/folder"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(std::string(kNode) + ": " + dir.path() + "/folder is a folder") != std::string::npos);
    CHECK(fs::is_empty(dir.path() + "/folder"));
}

TEST_CASE("kiln record prints a node's newest published record, and names what it lacks") {
    test::TempDir dir;
    const auto fleet = write_fleet(dir, "http://127.0.0.1:1");
    write_quarantine_state(dir);

    auto body = run({KILN_BINARY, "record", fleet, kNode, "smoke.result"});
    INFO(body.err);
    REQUIRE(body.exit_code == 0);
    const json result = json::parse(body.out);
    CHECK(result["verdict"] == "fail");
    CHECK(result["failed"][0]["name"] == "allreduce_busbw_gbps");
    CHECK(result["localisation"]["suspects"] == json::array({kNode}));

    auto wrapped = run({KILN_BINARY, "record", fleet, kNode, "smoke.result", "--json"});
    REQUIRE(wrapped.exit_code == 0);
    const json envelope = json::parse(wrapped.out);
    CHECK(envelope["kind"] == "smoke.result");
    CHECK(envelope["schema"] == 1);
    CHECK(envelope["stage"] == "smoke");
    CHECK(envelope["run_id"] == 1);
    CHECK(envelope["body"] == result);

    auto none = run({KILN_BINARY, "record", fleet, kNode, "handover"});
    CHECK(none.exit_code == 1);
    CHECK(none.out.empty());
    CHECK(none.err.find("no handover record of lab-gpu-07 in the journal") != std::string::npos);
    auto stranger = run({KILN_BINARY, "record", fleet, "nobody", "smoke.result"});
    CHECK(stranger.exit_code == 1);
    CHECK(stranger.err.find("no node 'nobody'") != std::string::npos);
}

TEST_CASE("at quarantine the bundle is written beside the fleet and journaled as an event") {
    test::TempDir dir;
    bmc::test::BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", planted_mockup(dir), "--port", "0"}, {{"KILN_BMC_PASSWORD", kSecret}}));
    const auto fleet_path = write_fleet(dir, bmc.url());
    write_quarantine_state(dir);
    config::LoadOptions opts;
    opts.known_stages = {"smoke", "handover"};
    auto loaded = config::load_fleet(fleet_path, opts);
    for (const auto& e : loaded.errors) UNSCOPED_INFO(e.str());
    REQUIRE(loaded.fleet);
    const auto& fleet = *loaded.fleet;
    engine::StopToken stop;
    std::vector<std::string> events;
    engine::StageContext ctx(fleet, *fleet.find_node(kNode), "smoke", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(2), nullptr,
                             [&](const std::string& k, const std::string& m) { events.push_back(k + ": " + m); });
    const std::string archive = evidence::write_quarantine_evidence(ctx, published_result(dir));
    INFO(fmt::format("{}", fmt::join(events, "\n")));
    REQUIRE_FALSE(archive.empty());
    CHECK(fs::path(archive).parent_path() == fs::path(dir.path()) / ".kiln" / "evidence");
    REQUIRE(events.size() == 1);
    CHECK(events[0] == "evidence: bundle written: " + archive);
    auto files = unpack(archive, dir);
    const std::string top = std::string(kNode) + "-evidence/";
    CHECK(files.count(top + "bmc/log_services/Systems-437XR1138R2-Log1.json"));
    CHECK(files.count(top + "journal/history.json"));
    check_no_secret(files);
}

TEST_CASE("kiln's own smoke stage writes the bundle when it quarantines a node") {
    test::TempDir dir;
    const auto fleet_path = write_fleet(dir, "http://127.0.0.1:1");
    write_quarantine_state(dir);
    engine::StageRegistry registry;
    engine::register_product_stages(registry);
    auto* smoke_stage = dynamic_cast<smoke::SmokeStage*>(registry.find("smoke"));
    REQUIRE(smoke_stage);
    REQUIRE(smoke_stage->options().on_quarantine);
    config::LoadOptions opts = registry.load_options();
    auto loaded = config::load_fleet(fleet_path, opts);
    REQUIRE(loaded.fleet);
    engine::StopToken stop;
    std::vector<std::string> events;
    engine::StageContext ctx(*loaded.fleet, *loaded.fleet->find_node(kNode), "smoke", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(2), nullptr,
                             [&](const std::string& k, const std::string& m) { events.push_back(k + ": " + m); });
    smoke_stage->options().on_quarantine(ctx, published_result(dir));
    INFO(fmt::format("{}", fmt::join(events, "\n")));
    const auto evidence_dir = fs::path(dir.path()) / ".kiln" / "evidence";
    REQUIRE(fs::is_directory(evidence_dir));
    std::vector<fs::path> archives;
    for (const auto& e : fs::directory_iterator(evidence_dir)) archives.push_back(e.path());
    REQUIRE(archives.size() == 1);  // no staging folder or temp file left beside it
    CHECK(archives[0].filename().string().rfind(std::string(kNode) + "-", 0) == 0);
    CHECK(archives[0].extension() == ".gz");
    CHECK(std::find(events.begin(), events.end(), "evidence: bundle written: " + archives[0].string()) != events.end());
}

TEST_CASE("the HPE DL325's IML, security and iLO event logs and its PCIe serials are read through kiln-bmc") {
    bmc::test::BmcChild bmc;
    REQUIRE(
        bmc.start({"--mockup", bmc::test::mockup_path("hpe-dl325"), "--port", "0"}, {{"KILN_BMC_PASSWORD", kSecret}}));
    net::CurlHttpClient http;
    redfish::SessionPool pool(http, evidence::bundle_bmc_options());
    redfish::Client client(pool.acquire({bmc.url(), "admin", kSecret, {}}));
    auto ev = evidence::collect_bmc_evidence(client);
    REQUIRE(ev);
    std::map<std::string, size_t> entries;
    for (const auto& l : ev->logs) entries[l.name] = l.doc["entries"].size();
    CHECK(entries["Systems-1-IML"] > 100);
    CHECK(entries["Systems-1-SL"] > 100);
    CHECK(entries["Managers-1-IEL"] > 100);
    bool serial = false;
    for (const auto& d : ev->parts["pcie_devices"]) serial = serial || d.value("SerialNumber", "") == "REE1950F79864";
    CHECK(serial);
    CHECK_FALSE(ev->tasks.is_null());
    for (const auto& [part, why] : ev->unavailable) UNSCOPED_INFO(part << ": " << why);
    CHECK(ev->unavailable.empty());
}

TEST_CASE("the scrubber finds a secret in raw, JSON-escaped and Basic-header form") {
    evidence::SecretScrubber s;
    s.add(kSecret);
    s.add_basic_credentials("admin", kSecret);
    std::string text = "a " + kSecret + " b " + json(kSecret).dump() + " c";
    CHECK(s.scrub(text) == 2);
    CHECK_FALSE(s.leaks(text));
    CHECK(text == "a [redacted] b \"[redacted]\" c");
    // What curl would send as "Authorization: Basic ...".
    std::string header = "Authorization: Basic " + std::string("YWRtaW46RXYxZCJzM2NyZXQtOXhR");
    CHECK(s.leaks(header));
    CHECK(s.scrub(header) == 1);
}
