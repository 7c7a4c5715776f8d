// End to end: kiln-bmc runs as a child process on free ports and real
// Redfish clients drive it: python3-sushy, redfishtool, and raw requests
// through Python's http.client.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/bmc/bmc_test_util.h"
#include "tests/support/proc_status.h"

using namespace kiln::bmc;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::ScratchDir;
using nlohmann::json;

namespace {

const std::map<std::string, std::string> kEnv = {{"KILN_BMC_PASSWORD", test::kPassword}};

std::vector<std::string> args_for(const std::string& mockup, std::vector<std::string> more = {}) {
    std::vector<std::string> a = {"--mockup", test::mockup_path(mockup), "--port", "0", "--user", "admin"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

void start_or_fail(BmcChild& child, const std::vector<std::string>& args, int count = 1) {
    if (!child.start(args, kEnv, count)) FAIL("kiln-bmc did not come up: " << child.output() << child.errors());
}

json redfishtool(const BmcChild& child, std::vector<std::string> args, const std::string& secure = "Never") {
    std::vector<std::string> argv = {"redfishtool", "-r",  child.host_port(), "-u", "admin", "-p", test::kPassword,
                                     "-S",          secure};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = test::run_program(argv);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.json;
}

std::string error_id(const json& result) {
    return result["body"]["error"]["@Message.ExtendedInfo"][0]["MessageId"];
}

}  // namespace

TEST_CASE("kiln-bmc drives both mockups with python3-sushy") {
    for (const std::string mockup : {"dmtf-public-rackmount1", "hpe-dl325"}) {
        INFO(mockup);
        BmcChild child;
        start_or_fail(child, args_for(mockup));
        auto r = test::run_python("sushy_drive.py", {child.url(), "admin", "AdminPhone", "555-0100"});
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        const json& out = r.json;
        CHECK(out["system_id"] == (mockup == "hpe-dl325" ? "1" : "437XR1138R2"));
        CHECK(out["power_before"] == "On");
        CHECK(out["sessions_during"] == 1);  // sushy logged in with a session
        CHECK(out["attr_before"] == "");
        CHECK(out["pending"] == "555-0100");
        CHECK(out["attr_still"] == "");
        CHECK(out["attr_after"] == "555-0100");  // applied by the reset
        CHECK(out["pending_after"].empty());
        CHECK(out["power_after_off"] == "Off");
        CHECK(out["sessions_after_logout"] == 0);  // sushy's close() logged out
        CHECK(child.stop() == 0);
    }
}

TEST_CASE("kiln-bmc answers redfishtool with Basic and with session auth") {
    BmcChild child;
    start_or_fail(child, args_for("dmtf-public-rackmount1"));
    auto systems = redfishtool(child, {"Systems"});
    CHECK(systems["Members"][0]["@odata.id"] == "/redfish/v1/Systems/437XR1138R2");

    auto system = redfishtool(child, {"-A", "Session", "Systems", "-1"});
    CHECK(system["PowerState"] == "On");
    redfishtool(child, {"-A", "Session", "Systems", "-1", "reset", "ForceOff"});
    auto off = redfishtool(child, {"Systems", "-1"});
    CHECK(off["PowerState"] == "Off");
    // redfishtool PATCHes with the ETag it read (If-Match).
    redfishtool(child, {"Systems", "-1", "setAssetTag", "rehearsal-42"});
    CHECK(redfishtool(child, {"Systems", "-1"})["AssetTag"] == "rehearsal-42");
    // Each -A Session run logged in and out: nothing leaked.
    auto sessions = test::probe(
        child.url(), json::array({{{"method", "GET"},
                                   {"path", "/redfish/v1/SessionService/Sessions"},
                                   {"headers", {{"Authorization", test::basic_auth("admin", test::kPassword)}}}}}));
    CHECK(sessions[0]["body"]["Members@odata.count"] == 0);
}

TEST_CASE("kiln-bmc speaks Redfish over raw HTTP") {
    BmcChild child;
    start_or_fail(child, args_for("hpe-dl325", {"--session-limit", "2"}));
    const json basic = {{"Authorization", test::basic_auth("admin", test::kPassword)}};
    const json creds = {{"UserName", "admin"}, {"Password", test::kPassword}};
    json reqs = json::array({
        {{"method", "GET"}, {"path", "/redfish/v1/"}},
        {{"method", "GET"}, {"path", "/redfish/v1/Systems/1"}},
        {{"method", "GET"}, {"path", "/redfish/v1/Systems/1"}, {"headers", basic}},
        {{"method", "PATCH"},
         {"path", "/redfish/v1/Systems/1"},
         {"headers", {{"Authorization", basic["Authorization"]}, {"If-Match", "\"stale\""}}},
         {"body", {{"AssetTag", "x"}}}},
        {{"method", "GET"}, {"path", "/redfish/v1/NoSuch"}, {"headers", basic}},
        {{"method", "POST"}, {"path", "/redfish/v1/SessionService/Sessions"}, {"body", creds}},
        {{"method", "POST"}, {"path", "/redfish/v1/SessionService/Sessions"}, {"body", creds}},
        {{"method", "POST"}, {"path", "/redfish/v1/SessionService/Sessions"}, {"body", creds}},
        {{"method", "GET"}, {"path", "/redfish/v1/Systems/1"}, {"use_token", true}},
        {{"method", "POST"},
         {"path", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"},
         {"use_token", true},
         {"body", {{"ResetType", "Bogus"}}}},
        {{"method", "PATCH"}, {"path", "/redfish/v1/Systems/1"}, {"use_token", true}, {"body", "{\"AssetTag\": "}},
    });
    auto r = test::probe(child.url(), reqs);
    REQUIRE(r.size() == reqs.size());

    CHECK(r[0]["status"] == 200);
    CHECK(r[0]["headers"]["odata-version"] == "4.0");
    CHECK(r[0]["headers"]["content-type"].get<std::string>().rfind("application/json", 0) == 0);
    CHECK(r[1]["status"] == 401);
    CHECK(r[1]["body"]["error"].contains("@Message.ExtendedInfo"));
    CHECK(r[2]["status"] == 200);
    const std::string etag = r[2]["headers"]["etag"];
    CHECK(etag.front() == '"');
    CHECK(r[3]["status"] == 412);
    CHECK(error_id(r[3]) == "Base.1.8.PreconditionFailed");
    CHECK(r[3]["headers"]["etag"] == etag);
    CHECK(r[4]["status"] == 404);
    CHECK(error_id(r[4]) == "Base.1.8.ResourceMissingAtURI");
    CHECK(r[5]["status"] == 201);
    CHECK(r[5]["headers"].contains("x-auth-token"));
    CHECK(r[5]["headers"]["location"].get<std::string>().rfind("/redfish/v1/SessionService/Sessions/", 0) == 0);
    CHECK(r[6]["status"] == 201);
    CHECK(r[7]["status"] == 503);
    CHECK(error_id(r[7]) == "IDRAC.2.8.RAC0218");
    CHECK(r[8]["status"] == 200);
    CHECK(r[9]["status"] == 400);
    CHECK(error_id(r[9]) == "Base.1.8.ActionParameterValueNotInList");
    CHECK(r[10]["status"] == 400);
    CHECK(error_id(r[10]) == "Base.1.8.MalformedJSON");
}

TEST_CASE("kiln-bmc keeps its state across its own restart") {
    ScratchDir state;
    const json basic = {{"Authorization", test::basic_auth("admin", test::kPassword)}};
    const json creds = {{"UserName", "admin"}, {"Password", test::kPassword}};
    std::string token;
    {
        BmcChild child;
        start_or_fail(child, args_for("dmtf-public-rackmount1", {"--state-dir", state.path()}));
        CHECK(child.output().find("state " + state.path() + "/bmc-0.json") != std::string::npos);
        auto r = test::probe(child.url(),
                             json::array({
                                 {{"method", "PATCH"},
                                  {"path", "/redfish/v1/Systems/437XR1138R2/Bios/Settings"},
                                  {"headers", basic},
                                  {"body", {{"Attributes", {{"ProcTurboMode", "Disabled"}}}}}},
                                 {{"method", "POST"}, {"path", "/redfish/v1/SessionService/Sessions"}, {"body", creds}},
                             }));
        REQUIRE(r[0]["status"] == 200);
        token = r[1]["headers"]["x-auth-token"];
        CHECK(child.stop() == 0);
    }
    BmcChild again;
    start_or_fail(again, args_for("dmtf-public-rackmount1", {"--state-dir", state.path()}));
    auto r = test::probe(
        again.url(),
        json::array({
            {{"method", "GET"}, {"path", "/redfish/v1/Systems/437XR1138R2/Bios/Settings"}, {"headers", basic}},
            {{"method", "GET"}, {"path", "/redfish/v1/Systems/437XR1138R2"}, {"headers", {{"X-Auth-Token", token}}}},
        }));
    CHECK(r[0]["body"]["Attributes"]["ProcTurboMode"] == "Disabled");
    CHECK(r[1]["status"] == 401);  // a BMC restart ends its sessions
}

TEST_CASE("kiln-bmc serves HTTPS with the given certificate") {
    ScratchDir dir;
    const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
    auto made = test::run_program({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                                   "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"});
    REQUIRE(made.exit_code == 0);
    BmcChild child;
    start_or_fail(child, args_for("hpe-dl325", {"--tls-cert", cert, "--tls-key", key}));
    REQUIRE(child.url().rfind("https://127.0.0.1:", 0) == 0);
    auto r = test::probe(child.url(), json::array({{{"method", "GET"}, {"path", "/redfish/v1"}}}));
    CHECK(r[0]["status"] == 200);
    CHECK(redfishtool(child, {"Systems", "-1"}, "Always")["Id"] == "1");
    // sushy verifies the BMC against its own certificate, as kiln does with a
    // pinned or per-BMC CA bundle.
    auto sushy = test::run_python("sushy_drive.py", {child.url(), "admin", "AdminPhone", "555-0199", cert});
    INFO(sushy.out << sushy.err);
    REQUIRE(sushy.exit_code == 0);
    CHECK(sushy.json["attr_after"] == "555-0199");
}

TEST_CASE("kiln-bmc serves several BMCs on consecutive ports") {
    // Find two free neighbours; another process may take them first, so retry.
    BmcChild child;
    bool up = false;
    for (int attempt = 0; attempt < 10 && !up; ++attempt) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        REQUIRE(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
        close(s);
        const int base = ntohs(a.sin_port);
        if (base > 65000) continue;
        BmcChild attempt_child;
        std::vector<std::string> args = {"--mockup",    test::mockup_path("dmtf-public-rackmount1"),
                                         "--port",      std::to_string(base),
                                         "--bmc-count", "3"};
        if (attempt_child.start(args, kEnv, 3)) {
            CHECK(attempt_child.urls()[0] == "http://127.0.0.1:" + std::to_string(base));
            CHECK(attempt_child.urls()[2] == "http://127.0.0.1:" + std::to_string(base + 2));
            const json basic = {{"Authorization", test::basic_auth("admin", test::kPassword)}};
            // Each BMC is its own: a change on one leaves the others.
            auto r0 = test::probe(attempt_child.urls()[0], json::array({{{"method", "PATCH"},
                                                                         {"path", "/redfish/v1/Systems/437XR1138R2"},
                                                                         {"headers", basic},
                                                                         {"body", {{"AssetTag", "only-bmc-0"}}}}}));
            CHECK(r0[0]["status"] == 200);
            auto r1 = test::probe(
                attempt_child.urls()[1],
                json::array({{{"method", "GET"}, {"path", "/redfish/v1/Systems/437XR1138R2"}, {"headers", basic}}}));
            CHECK(r1[0]["body"]["AssetTag"] == "Chicago-45Z-2381");
            CHECK(attempt_child.stop() == 0);
            up = true;
        }
    }
    CHECK(up);
}

namespace {

// The status code of GET /redfish/v1 on "http://127.0.0.1:PORT" over a
// plain socket (a python probe per BMC would take minutes at 2,000).
int service_root_status(const std::string& url) {
    const auto colon = url.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(std::stoi(url.substr(colon + 1))));
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(s);
        return -1;
    }
    const std::string req = "GET /redfish/v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    (void)!write(s, req.data(), req.size());
    char buf[64] = {};
    const ssize_t n = read(s, buf, sizeof buf - 1);
    close(s);
    if (n < 12) return -1;
    return std::atoi(buf + 9);  // "HTTP/1.1 200 OK"
}

}  // namespace

TEST_CASE("kiln-bmc serves 2,000 BMCs from a bounded set of threads, each its own BMC") {
    BmcChild child;
    const int count = 2000;
    REQUIRE(child.start(
        {"--mockup", test::mockup_path("dmtf-public-rackmount1"), "--port", "0", "--bmc-count", std::to_string(count)},
        kEnv, count));
    REQUIRE(child.urls().size() == static_cast<size_t>(count));
    // One loop thread per BMC up to 64, then shared (was: a thread each).
    const int threads = kiln::test::proc_threads(child.pid());
    INFO("threads " << threads);
    CHECK(threads >= 2);
    CHECK(threads <= 64 + 4);
    int answered = 0;
    for (const auto& url : child.urls()) answered += service_root_status(url) == 200;
    CHECK(answered == count);
    // The BMCs share the mockup's bodies until one changes its own.
    const json basic = {{"Authorization", test::basic_auth("admin", test::kPassword)}};
    auto patched = test::probe(
        child.urls().back(),
        json::array({{{"method", "PATCH"},
                      {"path", "/redfish/v1/Systems/437XR1138R2"},
                      {"headers", basic},
                      {"body", {{"AssetTag", "only-the-last"}}}},
                     {{"method", "GET"}, {"path", "/redfish/v1/Systems/437XR1138R2"}, {"headers", basic}}}));
    CHECK(patched[0]["status"] == 200);
    CHECK(patched[1]["body"]["AssetTag"] == "only-the-last");
    auto first = test::probe(
        child.urls().front(),
        json::array({{{"method", "GET"}, {"path", "/redfish/v1/Systems/437XR1138R2"}, {"headers", basic}}}));
    CHECK(first[0]["body"]["AssetTag"] == "Chicago-45Z-2381");
    CHECK(kiln::test::proc_threads(child.pid()) <= 64 + 4);
    CHECK(child.stop() == 0);
}

TEST_CASE("kiln-bmc refuses to start without its password variable") {
    auto r = test::run_program({KILN_BMC_BINARY, "--mockup", test::mockup_path("hpe-dl325"), "--port", "0",
                                "--password-env", "KILN_BMC_TEST_UNSET_VARIABLE"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("KILN_BMC_TEST_UNSET_VARIABLE") != std::string::npos);
    auto missing = test::run_program({KILN_BMC_BINARY, "--mockup", "/nonexistent", "--port", "0"}, kEnv);
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("not a mockup tree") != std::string::npos);
}
