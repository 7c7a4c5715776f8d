// kiln-bmc's UpdateService, faults and control endpoint over real HTTP on
// loopback: curl -F pushes, python3-sushy and redfishtool run SimpleUpdate
// against an image server in this process, and faults reach the wire.
#include <catch2/catch.hpp>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/bmc/bmc_test_util.h"

using namespace kiln::bmc;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::ScratchDir;
using nlohmann::json;

namespace {

const std::map<std::string, std::string> kEnv = {{"KILN_BMC_PASSWORD", test::kPassword}};
const std::string kUser = std::string("admin:") + test::kPassword;

std::vector<std::string> args_for(const std::string& mockup, std::vector<std::string> more = {}) {
    std::vector<std::string> a = {"--mockup", test::mockup_path(mockup), "--port", "0", "--task-seconds",
                                  "0.3",      "--restart-seconds",       "0.3"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

void start_or_fail(BmcChild& child, const std::vector<std::string>& args) {
    if (!child.start(args, kEnv)) FAIL("kiln-bmc did not come up: " << child.output() << child.errors());
}

// curl, printing the status code last: returns (exit code, stdout).
test::ScriptResult curl(std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-sS", "--max-time", "60", "-w", "\n%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_program(argv);
}

int status_of(const test::ScriptResult& r) {
    const auto nl = r.out.rfind('\n');
    return std::stoi(r.out.substr(nl + 1));
}

json body_of(const test::ScriptResult& r) {
    const auto nl = r.out.rfind('\n');
    return json::parse(r.out.substr(0, nl), nullptr, false);
}

// Polls a task monitor as a client does, honouring Retry-After, until it
// stops answering 202; bounded so a stuck task fails the test.
json follow_monitor(const BmcChild& child, const std::string& monitor) {
    for (int i = 0; i < 120; ++i) {
        auto r = curl({"-i", "-u", kUser, child.url() + monitor});
        const int status = status_of(r);
        if (status != 202) {
            const std::string text = r.out.substr(0, r.out.rfind('\n'));
            return json::parse(text.substr(text.find("\r\n\r\n") + 4), nullptr, false);
        }
        const auto ra = r.out.find("Retry-After: ");
        const int wait = ra == std::string::npos ? 1 : std::stoi(r.out.substr(ra + 13));
        std::this_thread::sleep_for(std::chrono::seconds(wait));
    }
    FAIL("task monitor " << monitor << " still answers 202");
    return nullptr;
}

}  // namespace

TEST_CASE("kiln-bmc takes a multipart push from curl -F and the version changes") {
    ScratchDir spool, files;
    BmcChild child;
    start_or_fail(child,
                  args_for("dmtf-public-rackmount1", {"--spool-dir", spool.path(), "--image-max-bytes", "4096"}));
    const std::string image = files.file("bmc.bin");
    std::ofstream(image) << test::kiln_image("BMC", "7.10", 2000);
    const std::string push = child.url() + "/redfish/v1/UpdateService/update-multipart";

    auto refused = curl({"-F", "UpdateFile=@" + image, push});
    CHECK(status_of(refused) == 401);

    auto r = curl(
        {"-i", "-u", kUser, "-F",
         R"(UpdateParameters={"Targets":["/redfish/v1/UpdateService/FirmwareInventory/BMC"]};type=application/json)",
         "-F", "UpdateFile=@" + image, push});
    INFO(r.out << r.err);
    REQUIRE(status_of(r) == 202);
    const auto loc = r.out.find("Location: ");
    REQUIRE(loc != std::string::npos);
    const std::string monitor = r.out.substr(loc + 10, r.out.find('\r', loc) - loc - 10);
    const json task = follow_monitor(child, monitor);
    CHECK(task["TaskState"] == "Completed");
    // The BMC restarted after its own update: wait out its 503s.
    json manager;
    for (int i = 0; i < 50; ++i) {
        auto m = curl({"-u", kUser, child.url() + "/redfish/v1/Managers/BMC"});
        if (status_of(m) == 200) {
            manager = body_of(m);
            break;
        }
        CHECK(status_of(m) == 503);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(manager["FirmwareVersion"] == "7.10");

    const std::string big = files.file("big.bin");
    std::ofstream(big) << test::kiln_image("BMC", "7.11", 8000);
    auto too_big = curl({"-u", kUser, "-F", "UpdateFile=@" + big, push});
    CHECK(status_of(too_big) == 413);
    CHECK(std::filesystem::is_empty(spool.path()));  // nothing left behind
    CHECK(child.stop() == 0);
}

TEST_CASE("kiln-bmc runs a SimpleUpdate for python3-sushy in both mockups") {
    test::ImageServer images({{"/bios.bin", test::kiln_image("BIOS", "2.4.1")}});
    // The HPE tree runs kiln-bmc's hpe mode (read from the tree): the new
    // version keeps iLO's form, the ROM family prefix before it.
    struct Case {
        std::string mockup, target, version_after;
    };
    for (const auto& [mockup, target, version_after] :
         std::vector<Case>{{"dmtf-public-rackmount1", "/redfish/v1/UpdateService/FirmwareInventory/BIOS", "2.4.1"},
                           {"hpe-dl325", "/redfish/v1/UpdateService/FirmwareInventory/2", "A43 v2.4.1"}}) {
        INFO(mockup);
        BmcChild child;
        start_or_fail(child, args_for(mockup));
        auto r = test::run_python("sushy_update.py", {child.url(), "admin", images.url("/bios.bin"), target});
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        const json& out = r.json;
        CHECK(out["systems"].size() == 1);
        CHECK(out["bios_attribute_count"].get<int>() > 5);
        CHECK(out["boot_target"] == "Cd");
        CHECK(out["boot_enabled"] == "Once");
        CHECK(out["version_before"] != "2.4.1");
        CHECK(out["accepted_status"] == 202);
        CHECK(out["task_state"] == "Completed");
        CHECK(out["task_status"] == "OK");
        CHECK(out["version_after"] == version_after);
        CHECK(out["bios_version"] == version_after);
        CHECK(child.stop() == 0);
    }
}

TEST_CASE("kiln-bmc runs a SimpleUpdate for redfishtool") {
    test::ImageServer images({{"/bios.bin", test::kiln_image("BIOS", "3.1.4")}});
    BmcChild child;
    start_or_fail(child, args_for("dmtf-public-rackmount1"));
    auto tool = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {"redfishtool", "-r",   child.host_port(), "-u", "admin", "-p", test::kPassword,
                                         "-S",          "Never"};
        argv.insert(argv.end(), args.begin(), args.end());
        auto r = test::run_program(argv);
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        return r.json;
    };
    CHECK(tool({"Systems", "list"})["Members"].size() == 1);
    CHECK(tool({"raw", "GET", "/redfish/v1/Systems/437XR1138R2/Bios"})["Attributes"].contains("ProcTurboMode"));
    tool({"Systems", "-1", "setBootOverride", "Once", "Cd"});
    CHECK(tool({"Systems", "-1"})["Boot"]["BootSourceOverrideTarget"] == "Cd");
    const json started = tool({"raw", "POST", "/redfish/v1/UpdateService/Actions/SimpleUpdate", "-d",
                               json{{"ImageURI", images.url("/bios.bin")}, {"TransferProtocol", "HTTP"}}.dump()});
    REQUIRE(started.contains("TaskMonitor"));
    const json task = follow_monitor(child, started["TaskMonitor"]);
    CHECK(task["TaskState"] == "Completed");
    CHECK(tool({"Systems", "-1"})["BiosVersion"] == "3.1.4");
    CHECK(images.requests() == 1);
}

TEST_CASE("kiln-bmc faults reach the wire: dropped connections and 503, set at start and at run time") {
    BmcChild child;
    start_or_fail(child, args_for("dmtf-public-rackmount1",
                                  {"--fault-drop", "1", "--fault-unavailable", "1", "--fault-retry-after", "3"}));
    const std::string system = child.url() + "/redfish/v1/Systems/437XR1138R2";
    auto dropped = curl({"-u", kUser, system});
    CHECK(dropped.exit_code == 52);  // curl: empty reply from server
    auto busy = curl({"-i", "-u", kUser, system});
    CHECK(status_of(busy) == 503);
    CHECK(busy.out.find("Retry-After: 3") != std::string::npos);
    CHECK(status_of(curl({"-u", kUser, system})) == 200);

    // At run time, no Redfish credentials needed.
    auto set = curl({"-X", "PATCH", "-d", R"({"drop_connections": 2})", child.url() + "/kiln-bmc/faults"});
    CHECK(status_of(set) == 200);
    CHECK(body_of(set)["drop_connections"] == 2);
    CHECK(curl({"-u", kUser, system}).exit_code == 52);
    CHECK(curl({"-u", kUser, system}).exit_code == 52);
    CHECK(status_of(curl({"-u", kUser, system})) == 200);
    auto bad = curl({"-X", "PATCH", "-d", R"({"drop": 2})", child.url() + "/kiln-bmc/faults"});
    CHECK(status_of(bad) == 400);
    CHECK(child.stop() == 0);
}

TEST_CASE("kiln-bmc takes --listen and --state for one BMC") {
    ScratchDir dir;
    BmcChild child;
    start_or_fail(child, {"--mockup", test::mockup_path("hpe-dl325"), "--listen", "127.0.0.1:0", "--state",
                          dir.file("one.json")});
    CHECK(child.output().find("state " + dir.file("one.json")) != std::string::npos);
    CHECK(status_of(curl({"-u", kUser, child.url() + "/redfish/v1/Systems/1"})) == 200);
    auto both = test::run_program({KILN_BMC_BINARY, "--mockup", test::mockup_path("hpe-dl325"), "--port", "0",
                                   "--bmc-count", "2", "--state", dir.file("x.json")},
                                  kEnv);
    CHECK(both.exit_code == 1);
    CHECK(both.err.find("--state is for one BMC") != std::string::npos);
}

TEST_CASE("kiln-bmc downloads https ImageURIs verified against --image-ca") {
    // The image server is a second kiln-bmc over HTTPS: its service root is
    // no firmware image, so a download that got through ends in
    // VerificationFailed, one refused by TLS in TransferFailed.
    ScratchDir dir;
    const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
    auto made = test::run_program({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                                   "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"});
    REQUIRE(made.exit_code == 0);
    BmcChild server;
    start_or_fail(server, args_for("hpe-dl325", {"--tls-cert", cert, "--tls-key", key}));
    const std::string image_uri = server.url() + "/redfish/v1";
    for (const bool with_ca : {true, false}) {
        INFO("with --image-ca: " << with_ca);
        BmcChild child;
        std::vector<std::string> more;
        if (with_ca) more = {"--image-ca", cert};
        start_or_fail(child, args_for("dmtf-public-rackmount1", more));
        auto r =
            curl({"-i", "-u", kUser, "-H", "Content-Type: application/json", "-d", json{{"ImageURI", image_uri}}.dump(),
                  child.url() + "/redfish/v1/UpdateService/Actions/SimpleUpdate"});
        REQUIRE(status_of(r) == 202);
        const auto loc = r.out.find("Location: ");
        const json task = follow_monitor(child, r.out.substr(loc + 10, r.out.find('\r', loc) - loc - 10));
        CHECK(task["TaskState"] == "Exception");
        const std::string first = task["Messages"][0]["MessageId"];
        CHECK(first == (with_ca ? "Update.1.0.VerificationFailed" : "Update.1.0.TransferFailed"));
    }
}

TEST_CASE("kiln-bmc generates a self-signed certificate and keeps it across restarts") {
    ScratchDir dir;
    std::string fingerprint;
    for (int run = 0; run < 2; ++run) {
        BmcChild child;
        start_or_fail(child, args_for("hpe-dl325", {"--tls-generate", dir.path()}));
        REQUIRE(child.url().rfind("https://127.0.0.1:", 0) == 0);
        const auto at = child.output().find("sha256 ");
        REQUIRE(at != std::string::npos);
        const std::string printed = child.output().substr(at + 7, 64);
        if (run == 0) fingerprint = printed;
        CHECK(printed == fingerprint);  // the same certificate the second time
        auto verified =
            curl({"--cacert", dir.file("kiln-bmc-cert.pem"), "-u", kUser, child.url() + "/redfish/v1/Systems/1"});
        INFO(verified.err);
        CHECK(status_of(verified) == 200);
        CHECK(child.stop() == 0);
    }
    auto openssl = test::run_program(
        {"openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", dir.file("kiln-bmc-cert.pem")});
    std::string hex;
    for (char ch : openssl.out.substr(openssl.out.find('=') + 1)) {
        if (std::isxdigit(static_cast<unsigned char>(ch))) hex += static_cast<char>(std::tolower(ch));
    }
    CHECK(hex == fingerprint);
    const auto perms = std::filesystem::status(dir.file("kiln-bmc-key.pem")).permissions();
    CHECK((perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
          std::filesystem::perms::none);
}

TEST_CASE("kiln-bmc applies start-time faults to the BMCs --fault-bmcs names") {
    BmcChild child;
    if (!child.start(
            args_for("dmtf-public-rackmount1", {"--bmc-count", "2", "--fault-unavailable", "5", "--fault-bmcs", "1"}),
            kEnv, 2)) {
        FAIL("kiln-bmc did not come up: " << child.output() << child.errors());
    }
    const std::string path = "/redfish/v1/Systems/437XR1138R2";
    CHECK(status_of(curl({"-u", kUser, child.urls()[0] + path})) == 200);
    CHECK(status_of(curl({"-u", kUser, child.urls()[1] + path})) == 503);
    CHECK(body_of(curl({child.urls()[0] + "/kiln-bmc/faults"}))["unavailable_requests"] == 0);
    CHECK(body_of(curl({child.urls()[1] + "/kiln-bmc/faults"}))["unavailable_requests"] == 4);
}
