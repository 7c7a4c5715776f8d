// The CLI contract, through real child processes: exit codes, output
// shapes, idempotency, the journal, signals.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "provisioner/journal/run_lock.h"
#include "tests/support/child.h"
#include "tests/support/cli_fleet.h"
#include "tests/support/test_stages.h"

using kiln::test::run_child;
using kiln::test::TempDir;
namespace fs = std::filesystem;

namespace {

struct Cli {
    TempDir dir;
    std::string fleet;
    std::map<std::string, std::string> env;
    explicit Cli(int nodes = 3, const std::string& limits = "parallel = 2") {
        fleet = kiln::test::write_cli_fleet(dir, nodes, limits);
        env = {{"KILN_TEST_LEDGER", dir.file("ledger")}, {"KILN_TEST_ACTIONS", "2"}};
    }
    kiln::test::ChildResult operator()(std::vector<std::string> args,
                                       const std::map<std::string, std::string>& extra = {}) const {
        args.insert(args.begin(), KILN_TEST_DRIVER);
        auto e = env;
        for (const auto& [k, v] : extra) e[k] = v;
        return run_child(args, e);
    }
    size_t ledger_size() const { return kiln::test::LedgerStage::read_ledger(dir.file("ledger")).size(); }
};

}  // namespace

TEST_CASE("cli: validate reports ok, or FILE:LINE:COL errors with exit 1", "[cli]") {
    Cli cli;
    auto ok = cli({"validate", cli.fleet});
    REQUIRE(ok.exit_code == 0);
    REQUIRE_THAT(ok.out, Catch::Contains("ok: fleet clitest, 3 nodes in 2 racks"));

    auto bad = cli.dir.write("bad.toml", "schema = 1\n[fleet]\nname = \"x\"\nbogus = 3\n");
    auto r = cli({"validate", bad});
    REQUIRE(r.exit_code == 1);
    REQUIRE_THAT(r.err, Catch::Contains(bad + ":4:1: fleet.bogus: unknown key 'bogus'"));
    REQUIRE_THAT(r.err, Catch::Contains("bogus"));
    REQUIRE_THAT(r.err, Catch::Contains("nothing was changed"));
}

TEST_CASE("cli: plan changes nothing and its detailed exit code is 2 before apply and 0 after", "[cli]") {
    Cli cli;
    auto p = cli({"plan", cli.fleet, "--detailed-exitcode"});
    INFO(p.out << p.err);
    REQUIRE(p.exit_code == 2);
    REQUIRE_THAT(p.out, Catch::Contains("Plan: 12 node-stages with work (24 actions), 0 converged, 0 errors."));
    REQUIRE(cli.ledger_size() == 0);
    REQUIRE_FALSE(fs::exists(cli.dir.file(".kiln/journal.db")));  // plan created no journal

    auto plain = cli({"plan", cli.fleet});
    REQUIRE(plain.exit_code == 0);  // without the flag, work is not an error

    auto a = cli({"apply", cli.fleet});
    INFO(a.out << a.err);
    REQUIRE(a.exit_code == 0);
    REQUIRE(cli.ledger_size() == 24);
    REQUIRE(fs::exists(cli.dir.file(".kiln/journal.db")));

    auto p2 = cli({"plan", cli.fleet, "--detailed-exitcode", "--json"});
    REQUIRE(p2.exit_code == 0);
    auto j = nlohmann::json::parse(p2.out);
    REQUIRE(j["summary"]["work"] == 0);
    REQUIRE(j["summary"]["converged"] == 12);
}

TEST_CASE("cli: a second apply performs no action and says so", "[cli]") {
    Cli cli;
    REQUIRE(cli({"apply", cli.fleet}).exit_code == 0);
    auto second = cli({"apply", cli.fleet, "--json"});
    REQUIRE(second.exit_code == 0);
    REQUIRE(cli.ledger_size() == 24);
    // The last line of the event stream is the summary.
    auto last = second.out.substr(second.out.rfind('\n', second.out.size() - 2) + 1);
    auto j = nlohmann::json::parse(last);
    REQUIRE(j["event"] == "summary");
    REQUIRE(j["actions"] == 0);
    REQUIRE(j["stages_skipped"] == 12);
    auto text = cli({"apply", cli.fleet});
    REQUIRE_THAT(text.out, Catch::Contains("nothing to do: every selected node-stage is converged"));
}

TEST_CASE("cli: status --json has the documented shape and states", "[cli]") {
    Cli cli;
    auto before = nlohmann::json::parse(cli({"status", cli.fleet, "--json"}).out);
    REQUIRE(before["nodes"].size() == 3);
    for (const auto& n : before["nodes"]) {
        REQUIRE(n["state"] == "pending");
        REQUIRE(n.contains("name"));
        REQUIRE(n.contains("stage"));
        REQUIRE(n.contains("error"));
    }
    REQUIRE(cli({"apply", cli.fleet, "--node", "n2"}).exit_code == 0);
    auto after = nlohmann::json::parse(cli({"status", cli.fleet, "--json"}).out);
    std::map<std::string, std::string> st;
    for (const auto& n : after["nodes"]) st[n["name"]] = n["state"];
    REQUIRE(st["n1"] == "pending");
    REQUIRE(st["n2"] == "ready");
    REQUIRE(cli.ledger_size() == 8);
}

TEST_CASE("cli: --stage selects stages and unknown nodes or stages are errors", "[cli]") {
    Cli cli;
    auto r = cli({"apply", cli.fleet, "--stage", "alpha"});
    REQUIRE(r.exit_code == 0);
    REQUIRE(cli.ledger_size() == 6);
    auto n = cli({"apply", cli.fleet, "--node", "ghost"});
    REQUIRE(n.exit_code == 1);
    REQUIRE_THAT(n.err, Catch::Contains("no node 'ghost'"));
    auto s = cli({"plan", cli.fleet, "--stage", "nope"});
    REQUIRE(s.exit_code == 1);
    REQUIRE_THAT(s.err, Catch::Contains("no stage named 'nope'"));
}

TEST_CASE("cli: history shows the node's stages and actions", "[cli]") {
    Cli cli(1);
    REQUIRE(cli({"apply", cli.fleet}).exit_code == 0);
    auto h = cli({"history", cli.fleet, "n1", "--json", "--limit", "0"});
    REQUIRE(h.exit_code == 0);
    auto j = nlohmann::json::parse(h.out);
    int stages = 0, actions = 0;
    for (const auto& e : j["entries"]) {
        stages += e["kind"] == "stage";
        actions += e["kind"] == "action" && e["outcome"] == "ok";
    }
    REQUIRE(stages == 4);
    REQUIRE(actions == 8);
    auto text = cli({"history", cli.fleet, "n1"});
    REQUIRE_THAT(text.out, Catch::Contains("stage t-handover verified"));
}

TEST_CASE("cli: reimage reruns the reimage pipeline's stages for one node", "[cli]") {
    Cli cli(2);
    REQUIRE(cli({"apply", cli.fleet}).exit_code == 0);
    auto r = cli({"reimage", cli.fleet, "n1", "--json"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    auto last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
    auto j = nlohmann::json::parse(last);
    REQUIRE(j["stages_run"] == 3);  // beta, gamma, t-handover verified again
    REQUIRE(j["stages_skipped"] == 0);
    REQUIRE(j["nodes"].size() == 1);
    REQUIRE(j["nodes"][0]["state"] == "ready");
}

TEST_CASE("cli: a literal secret is refused and never printed", "[cli]") {
    Cli cli;
    auto path = cli.dir.write("secret.toml", kiln::test::read_file(cli.fleet) +
                                                 "\n[[nodes]]\nname = \"n9\"\nrack = \"r1\"\nrole = \"test-node\"\n"
                                                 "bmc = { url = \"https://h\", password = \"hunter2-secret\" }\n");
    auto r = cli({"validate", path});
    REQUIRE(r.exit_code == 1);
    REQUIRE_THAT(r.err, Catch::Contains("literal secret"));
    REQUIRE(r.err.find("hunter2-secret") == std::string::npos);
    REQUIRE(r.out.find("hunter2-secret") == std::string::npos);
}

TEST_CASE("cli: SIGINT stops after the action in flight and the re-run finishes", "[cli][stop]") {
    Cli cli(2, "parallel = 1");
    auto r = cli({"apply", cli.fleet}, {{"KILN_TEST_INTERRUPT_AT", "3"}});
    INFO(r.out << r.err << " signal " << r.signal);
    REQUIRE(r.exit_code == 130);
    REQUIRE(cli.ledger_size() == 3);  // the third action finished, nothing after it started
    auto status = nlohmann::json::parse(cli({"status", cli.fleet, "--json"}).out);
    bool interrupted = false;
    for (const auto& n : status["nodes"]) interrupted = interrupted || n["detail"] == "interrupted";
    REQUIRE(interrupted);
    auto again = cli({"apply", cli.fleet});
    REQUIRE(again.exit_code == 0);
    auto ledger = kiln::test::LedgerStage::read_ledger(cli.dir.file("ledger"));
    REQUIRE(ledger.size() == 16);
    for (const auto& [line, count] : ledger) REQUIRE(count == 1);
}

TEST_CASE("cli: two applies on one journal: the second is refused", "[cli]") {
    Cli cli(1);
    // Hold the lock as a running apply would.
    auto lock = kiln::journal::RunLock::acquire(cli.dir.file(".kiln/journal.db"));
    REQUIRE(lock.ok());
    auto r = cli({"apply", cli.fleet});
    REQUIRE(r.exit_code == 1);
    REQUIRE_THAT(r.err, Catch::Contains("another kiln run"));
    REQUIRE(cli.ledger_size() == 0);
}

TEST_CASE("cli: the shipped kiln implements every product stage, in pipeline order", "[cli]") {
    auto r = run_child({KILN_BINARY, "stages", "--json"});
    REQUIRE(r.exit_code == 0);
    auto stages = nlohmann::json::parse(r.out)["stages"];
    std::vector<std::string> names;
    for (const auto& s : stages) {
        INFO(s.dump());
        CHECK(s["implemented"] == true);
        names.push_back(s["name"]);
    }
    REQUIRE(names == std::vector<std::string>{"firmware", "network", "image", "vm", "smoke", "handover"});
    auto help = run_child({KILN_BINARY, "--help"});
    REQUIRE(help.exit_code == 0);
    REQUIRE_THAT(help.out, Catch::Contains("reimage"));
}

TEST_CASE("cli: host inspect reads a recorded sysfs tree and fails clearly on a missing one", "[cli][host]") {
    const std::string sysfs = std::string(KILN_TEST_FIXTURES) + "/sysfs/azure-ndv5";
    auto j = run_child({KILN_BINARY, "host", "inspect", "--sysfs", sysfs, "--json"});
    INFO(j.err);
    REQUIRE(j.exit_code == 0);
    auto model = nlohmann::json::parse(j.out);
    REQUIRE(model.is_object());
    auto text = run_child({KILN_BINARY, "host", "inspect", "--sysfs", sysfs});
    REQUIRE(text.exit_code == 0);
    REQUIRE_THAT(text.out, Catch::Contains("8 GPUs"));
    REQUIRE_THAT(text.out, Catch::Contains("4 NVSwitches"));
    // Nested switches (HGX A100): each GPU PXB to both ports of its pair's NIC, in nvidia-smi's words.
    const std::string hgx = std::string(KILN_TEST_FIXTURES) + "/sysfs/hgx-a100";
    auto hgx_text = run_child({KILN_BINARY, "host", "inspect", "--sysfs", hgx});
    REQUIRE(hgx_text.exit_code == 0);
    REQUIRE_THAT(hgx_text.out, Catch::Contains("pairs with 0000:08:00.0 (PXB) 0000:08:00.1 (PXB)"));
    REQUIRE_THAT(hgx_text.out, Catch::Contains("  0000:07:00.0: mlx5_0 PXB mlx5_1 PXB mlx5_2 SYS"));
    auto hgx_json = run_child({KILN_BINARY, "host", "inspect", "--sysfs", hgx, "--json"});
    REQUIRE(hgx_json.exit_code == 0);
    const auto g0 = nlohmann::json::parse(hgx_json.out)["gpus"][0];
    REQUIRE(g0["pairs"][0]["relation"] == "PXB");
    REQUIRE(g0["relations"][2]["name"] == "mlx5_2");
    REQUIRE(g0["relations"][2]["relation"] == "SYS");
    REQUIRE_THAT(hgx_text.out, Catch::Contains("gdr 0000:07:00.0 <-> 0000:08:00.0 (PXB): GDR path ready: no, because "
                                               "ACS redirects P2P at 0000:04:00.0"));
    REQUIRE(nlohmann::json::parse(hgx_json.out)["gdr_paths"][0]["ready"] == "no");
    auto missing = run_child({KILN_BINARY, "host", "inspect", "--sysfs", "/nonexistent/sys"});
    REQUIRE(missing.exit_code == 1);
    REQUIRE_THAT(missing.err, Catch::Contains("/nonexistent/sys"));
}

TEST_CASE("cli: vm xml prints each VM's domain and NCCL file from a recorded host, and changes nothing", "[cli][vm]") {
    TempDir dir;
    const std::string hgx = std::string(KILN_TEST_FIXTURES) + "/sysfs/hgx-a100";
    const std::string fleet = dir.write("fleet.toml",
                                        "schema = 1\n[fleet]\nname = \"t\"\n[[racks]]\nname = \"r1\"\n"
                                        "[vm.gpu]\nsplit = \"numa\"\naccelerator = \"tcg\"\n"
                                        "sysfs = \"" +
                                            hgx +
                                            "\"\nbase_image = \"guest.qcow2\"\n"
                                            "[[nodes]]\nname = \"n1\"\nrack = \"r1\"\nrole = \"reimage\"\n"
                                            "vm = \"gpu\"\n");
    auto xml = run_child({KILN_BINARY, "vm", "xml", fleet, "n1"});
    INFO(xml.err);
    REQUIRE(xml.exit_code == 0);
    // One domain per NUMA node with GPUs, each a libvirt domain of type qemu (TCG, as asked).
    size_t domains = 0;
    for (size_t at = xml.out.find("<domain type='qemu'"); at != std::string::npos;
         at = xml.out.find("<domain type='qemu'", at + 1))
        ++domains;
    REQUIRE(domains >= 1);
    REQUIRE_THAT(xml.out, Catch::Contains("<hostdev mode='subsystem' type='pci'"));
    REQUIRE_THAT(xml.err, Catch::Contains("split numa") && Catch::Contains("accelerator tcg"));
    // No host device is passed through twice, across all the node's VMs.
    std::set<std::string> sources;
    size_t hostdevs = 0;
    const std::string tag = "<source>\n        <address ";
    for (size_t at = xml.out.find(tag); at != std::string::npos; at = xml.out.find(tag, at + 1)) {
        const size_t from = at + tag.size();
        const std::string addr = xml.out.substr(from, xml.out.find("/>", from) - from);
        INFO(addr);
        CHECK(sources.insert(addr).second);
        ++hostdevs;
    }
    CHECK(hostdevs >= 8);  // the HGX A100's eight GPUs at least, with their NICs
    CHECK(sources.count("domain='0x0000' bus='0x07' slot='0x00' function='0x0'") == 1);
    auto topo = run_child({KILN_BINARY, "vm", "xml", fleet, "n1", "--nccl-topo"});
    REQUIRE(topo.exit_code == 0);
    REQUIRE_THAT(topo.out, Catch::Contains("NCCL_TOPO_FILE") && Catch::Contains("<system"));
    // Nothing written beside the fleet (no overlays, seeds or journal).
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
    // A node the fleet lacks, and a recorded tree that is not there: exit 1, named.
    auto none = run_child({KILN_BINARY, "vm", "xml", fleet, "n9"});
    CHECK(none.exit_code == 1);
    CHECK_THAT(none.err, Catch::Contains("no node 'n9'"));
    auto gone = run_child({KILN_BINARY, "vm", "xml", fleet, "n1", "--sysfs", "/nonexistent/sys"});
    CHECK(gone.exit_code == 1);
    CHECK_THAT(gone.err, Catch::Contains("/nonexistent/sys"));
}
