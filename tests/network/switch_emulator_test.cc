// kiln-switch's emulated NVUE and eAPI services, request by request: what
// they accept, what they refuse as the real switches do, faults, drift
// changes and the state file.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "network/emulator/eapi_service.h"
#include "network/emulator/emulated_switch.h"
#include "provisioner/net/http_client.h"
#include "tests/support/temp_dir.h"

using namespace kiln::network::emulator;
using nlohmann::json;

namespace {

// "admin:pw" in Basic form.
const std::string kAuth = "Basic YWRtaW46cHc=";

std::unique_ptr<EmulatedSwitch> open_switch(const std::string& os, const std::string& state_file = "",
                                            const std::string& model = "") {
    SwitchSpec spec;
    spec.name = "sw";
    spec.os = os;
    spec.password = "pw";
    spec.state_file = state_file;
    spec.model = model;
    auto sw = EmulatedSwitch::open(spec);
    REQUIRE(sw);
    return std::move(*sw);
}

SwitchResponse call(EmulatedSwitch& sw, const std::string& method, const std::string& path, const json& body = nullptr,
                    std::map<std::string, std::string> query = {}) {
    SwitchRequest r;
    r.method = method;
    r.path = path;
    r.query = std::move(query);
    r.authorization = kAuth;
    if (!body.is_null()) r.body = body.dump();
    return sw.handle(r);
}

json run_cmds(EmulatedSwitch& sw, const std::vector<std::string>& cmds) {
    auto r = call(sw, "POST", "/command-api",
                  {{"jsonrpc", "2.0"}, {"method", "runCmds"}, {"id", 1}, {"params", {{"version", 1}, {"cmds", cmds}}}});
    REQUIRE(r.status == 200);
    return json::parse(r.body);
}

}  // namespace

TEST_CASE("switch emulator: no credentials, no answer") {
    auto sw = open_switch("nvue");
    SwitchRequest r;
    r.method = "GET";
    r.path = "/nvue_v1/";
    CHECK(sw->handle(r).status == 401);
    r.authorization = "Basic YWRtaW46d3Jvbmc=";  // admin:wrong
    CHECK(sw->handle(r).status == 401);
    r.path = "/_emulator/running";
    CHECK(sw->handle(r).status == 401);
}

TEST_CASE("switch emulator: NVUE revisions carry '/' in their ids and apply only with a yes") {
    auto sw = open_switch("nvue");
    auto created = json::parse(call(*sw, "POST", "/nvue_v1/revision").body);
    REQUIRE(created.size() == 1);
    const std::string id = created.begin().key();
    CHECK(id.find('/') != std::string::npos);

    CHECK(call(*sw, "PATCH", "/nvue_v1/interface", {{"swp1", {{"link", {{"mtu", 9216}}}}}}).status == 400);  // no rev
    CHECK(call(*sw, "PATCH", "/nvue_v1/interface", {{"swp1", {{"link", {{"mtu", 9216}}}}}}, {{"rev", id}}).status ==
          200);
    // Not applied yet: the applied tree is unchanged.
    CHECK_FALSE(sw->running()["interface"].contains("swp1"));
    CHECK(call(*sw, "PATCH", "/nvue_v1/revision/" + id, {{"state", "apply"}}).status == 200);
    CHECK(json::parse(call(*sw, "GET", "/nvue_v1/revision/" + id).body)["state"] == "ays_fail");
    CHECK_FALSE(sw->running()["interface"].contains("swp1"));

    auto second = json::parse(call(*sw, "POST", "/nvue_v1/revision").body).begin().key();
    CHECK(second != id);
    call(*sw, "PATCH", "/nvue_v1/interface", {{"swp1", {{"link", {{"mtu", 9216}}}}}}, {{"rev", second}});
    call(*sw, "PATCH", "/nvue_v1/revision/" + second, {{"state", "apply"}, {"auto-prompt", {{"ays", "ays_yes"}}}});
    CHECK(json::parse(call(*sw, "GET", "/nvue_v1/revision/" + second).body)["state"] == "applied");
    CHECK(json::parse(call(*sw, "GET", "/nvue_v1/interface/swp1/link", nullptr, {{"rev", "applied"}}).body)["mtu"] ==
          9216);
}

TEST_CASE("switch emulator: NVUE refuses watchdog values its schema refuses, and a watchdog without PFC") {
    auto sw = open_switch("nvue");
    const std::string id = json::parse(call(*sw, "POST", "/nvue_v1/revision").body).begin().key();
    const json tree_before = json::parse(call(*sw, "GET", "/nvue_v1/", nullptr, {{"rev", id}}).body);
    auto slow = call(*sw, "PATCH", "/nvue_v1/qos", {{"pfc-watchdog", {{"polling-interval", 50}}}}, {{"rev", id}});
    CHECK(slow.status == 400);
    CHECK_THAT(json::parse(slow.body)["detail"].get<std::string>(), Catch::Contains("100-5000"));
    CHECK(call(*sw, "PATCH", "/nvue_v1/qos", {{"pfc-watchdog", {{"robustness", 0}}}}, {{"rev", id}}).status == 400);
    CHECK(call(*sw, "PATCH", "/nvue_v1/interface", {{"bond0", {{"qos", {{"pfc-watchdog", {{"state", "enable"}}}}}}}},
               {{"rev", id}})
              .status == 400);
    CHECK(call(*sw, "PATCH", "/nvue_v1/qos", {{"mapping", {{"default-global", {{"trust", "dscp"}}}}}}, {{"rev", id}})
              .status == 400);
    // Refused PATCHes leave the revision as it was.
    CHECK(json::parse(call(*sw, "GET", "/nvue_v1/", nullptr, {{"rev", id}}).body) == tree_before);

    // A watchdog on a port with no PFC (RoCE off, no PFC profile): the apply ends invalid.
    REQUIRE(call(*sw, "PATCH", "/nvue_v1/interface", {{"swp1", {{"qos", {{"pfc-watchdog", {{"state", "enable"}}}}}}}},
                 {{"rev", id}})
                .status == 200);
    call(*sw, "PATCH", "/nvue_v1/revision/" + id, {{"state", "apply"}, {"auto-prompt", {{"ays", "ays_yes"}}}});
    auto st = json::parse(call(*sw, "GET", "/nvue_v1/revision/" + id).body);
    CHECK(st["state"] == "invalid");
    CHECK_FALSE(sw->running()["interface"].contains("swp1"));

    // With PFC on the port it applies, and the applied tree keeps the state.
    const std::string ok = json::parse(call(*sw, "POST", "/nvue_v1/revision").body).begin().key();
    call(*sw, "PATCH", "/nvue_v1/interface",
         {{"swp1", {{"qos", {{"pfc", {{"profile", "default-global"}}}, {"pfc-watchdog", {{"state", "enable"}}}}}}}},
         {{"rev", ok}});
    call(*sw, "PATCH", "/nvue_v1/revision/" + ok, {{"state", "apply"}, {"auto-prompt", {{"ays", "ays_yes"}}}});
    CHECK(json::parse(call(*sw, "GET", "/nvue_v1/revision/" + ok).body)["state"] == "applied");
    CHECK(sw->running()["interface"]["swp1"]["qos"]["pfc-watchdog"]["state"] == "enable");
}

TEST_CASE("switch emulator: eAPI show version names the model, whose platform decides the queue command") {
    auto strata = open_switch("eos");
    auto v = run_cmds(*strata, {"show version"});
    REQUIRE(v.contains("result"));
    CHECK(v["result"][0]["modelName"] == kDefaultEosModel);
    CHECK(run_cmds(*strata, {"enable", "configure", "interface Ethernet1/1", "tx-queue 3"}).contains("result"));
    auto no_uc = run_cmds(*strata, {"enable", "configure", "interface Ethernet1/1", "uc-tx-queue 3"});
    REQUIRE(no_uc.contains("error"));

    auto voq = open_switch("eos", "", "DCS-7280CR3-32P4");
    CHECK(run_cmds(*voq, {"show version"})["result"][0]["modelName"] == "DCS-7280CR3-32P4");
    const json before = voq->running();
    const std::string kEcnCommand =
        "random-detect ecn minimum-threshold 1 kbytes maximum-threshold 2 kbytes max-mark-probability 3";
    // Refused inside a session: the whole call fails with the CLI's error for
    // that command, and nothing reaches the running config.
    auto bad = run_cmds(*voq, {"enable", "configure session s1", "interface Ethernet1/1", "mtu 9214", "tx-queue 3",
                               kEcnCommand, "commit"});
    REQUIRE(bad.contains("error"));
    CHECK(bad["error"]["code"] == 1002);
    CHECK_THAT(bad["error"]["message"].get<std::string>(), Catch::Contains("CLI command 5 of 7 'tx-queue 3' failed"));
    REQUIRE(bad["error"]["data"].size() == 5);
    CHECK_THAT(bad["error"]["data"][4]["errors"][0].get<std::string>(), Catch::Contains("invalid command"));
    CHECK(voq->running() == before);
    auto good = run_cmds(*voq, {"enable", "configure session s2", "interface Ethernet1/1", "uc-tx-queue 3", kEcnCommand,
                                "priority-flow-control pause watchdog", "commit"});
    REQUIRE(good.contains("result"));
    const json intf = voq->running()["cmds"]["interface Ethernet1/1"]["cmds"];
    CHECK(intf["uc-tx-queue 3"]["cmds"].size() == 1);
    CHECK(intf.contains("priority-flow-control pause watchdog"));

    // Watchdog times: two decimals for timeout and recovery-time, three for the poll.
    CHECK(run_cmds(*voq, {"enable", "configure", "priority-flow-control pause watchdog default timeout 0.2"})
              .contains("result"));
    CHECK(run_cmds(*voq, {"enable", "configure", "priority-flow-control pause watchdog default polling-interval 0.015"})
              .contains("result"));
    CHECK(run_cmds(*voq, {"enable", "configure", "priority-flow-control pause watchdog default timeout 0.205"})
              .contains("error"));

    SwitchSpec unknown;
    unknown.name = "sw";
    unknown.os = "eos";
    unknown.model = "DCS-9999";
    auto refused = EmulatedSwitch::open(unknown);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == "emulator.bad_model");
    CHECK_THAT(refused.error().message, Catch::Contains("DCS-7280CR3-32P4"));
    unknown.os = "nvue";
    CHECK_FALSE(EmulatedSwitch::open(unknown));
}

TEST_CASE("switch emulator: eAPI modes, replacing lines, no forms, invalid commands") {
    auto sw = open_switch("eos");
    auto r = run_cmds(
        *sw, {"enable", "configure", "interface Ethernet1/1", "mtu 1500", "mtu 9214", "qos trust dscp", "tx-queue 3",
              "random-detect ecn minimum-threshold 1 kbytes maximum-threshold 2 kbytes max-mark-probability 3",
              "qos map dscp 26 to traffic-class 3", "end"});
    REQUIRE(r.contains("result"));
    const json cmds = sw->running()["cmds"];
    // "mtu 9214" replaced "mtu 1500"; a top-level command left the interface.
    CHECK(cmds["interface Ethernet1/1"]["cmds"].contains("mtu 9214"));
    CHECK_FALSE(cmds["interface Ethernet1/1"]["cmds"].contains("mtu 1500"));
    CHECK(cmds.contains("qos map dscp 26 to traffic-class 3"));
    CHECK(cmds["interface Ethernet1/1"]["cmds"]["tx-queue 3"]["cmds"].size() == 1);

    run_cmds(*sw, {"enable", "configure", "interface Ethernet1/1", "no qos trust dscp"});
    CHECK_FALSE(sw->running()["cmds"]["interface Ethernet1/1"]["cmds"].contains("qos trust dscp"));

    auto bad = run_cmds(*sw, {"enable", "configure", "interface Ethernet1/1", "mtu jumbo"});
    REQUIRE(bad.contains("error"));
    CHECK(bad["error"]["code"] == 1002);
    REQUIRE(bad["error"]["data"].size() == 4);
    CHECK_THAT(bad["error"]["data"][3]["errors"][0].get<std::string>(), Catch::Contains("invalid command"));
    auto unpriv = run_cmds(*sw, {"configure"});
    CHECK(unpriv.contains("error"));
}

TEST_CASE("switch emulator: an eAPI session changes nothing until commit: abort and a failed commit drop it") {
    auto sw = open_switch("eos");
    const json before = sw->running();
    run_cmds(*sw, {"enable", "configure session s1", "interface Ethernet1/1", "mtu 9214"});
    CHECK(sw->running() == before);
    run_cmds(*sw, {"enable", "configure session s1", "abort"});
    run_cmds(*sw, {"enable", "configure session s1", "commit"});
    CHECK(sw->running() == before);  // the aborted lines are gone

    sw->set_faults({0, 1});
    auto failed = run_cmds(*sw, {"enable", "configure session s2", "interface Ethernet1/1", "mtu 9214", "commit"});
    REQUIRE(failed.contains("error"));
    CHECK_THAT(failed["error"]["message"].get<std::string>(), Catch::Contains("commit failed"));
    CHECK(sw->running() == before);
    CHECK(sw->faults().fail_applies == 0);
    run_cmds(*sw, {"enable", "configure session s3", "interface Ethernet1/1", "mtu 9214", "commit"});
    CHECK(sw->running()["cmds"]["interface Ethernet1/1"]["cmds"].contains("mtu 9214"));
}

TEST_CASE("switch emulator: faults and behind-the-back changes through the control path: state survives a restart") {
    kiln::test::TempDir dir;
    const std::string state = dir.file("sw.json");
    {
        auto sw = open_switch("eos", state);
        CHECK(call(*sw, "PUT", "/_emulator/faults", {{"fail_applies", -1}}).status == 200);
        CHECK(json::parse(call(*sw, "GET", "/_emulator/faults").body)["fail_applies"] == -1);
        auto r = call(*sw, "POST", "/_emulator/running", {{"cmds", {"interface Ethernet3/1", "mtu 1500"}}});
        REQUIRE(r.status == 200);
        CHECK(call(*sw, "POST", "/_emulator/running", {{"cmds", {"frobnicate"}}}).status == 400);
    }
    auto again = open_switch("eos", state);
    CHECK(again->running()["cmds"]["interface Ethernet3/1"]["cmds"].contains("mtu 1500"));
    SwitchSpec wrong;
    wrong.name = "sw";
    wrong.os = "nvue";
    wrong.state_file = state;
    auto refused = EmulatedSwitch::open(wrong);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == "emulator.state_malformed");
}

TEST_CASE("switch emulator: fault specs") {
    auto f = parse_faults("delay=250,fail-applies=all");
    REQUIRE(f);
    CHECK(f->delay_ms == 250);
    CHECK(f->fail_applies == -1);
    CHECK_FALSE(parse_faults("explode=1"));
    CHECK_FALSE(parse_faults("delay=soon"));
    CHECK(eos_line_key("mtu 9214") == eos_line_key("mtu 1500"));
    CHECK(eos_line_key("priority-flow-control priority 3 no-drop") !=
          eos_line_key("priority-flow-control priority 4 no-drop"));
}

TEST_CASE("kiln-switch: serves each switch on its own port, keeps state, and stops on SIGTERM") {
    kiln::test::TempDir dir;
    int out[2];
    REQUIRE(::pipe(out) == 0);
    ::setenv("KILN_TEST_SWITCH_BIN_PASSWORD", "pw", 1);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(out[1], 1);
        ::close(out[0]);
        ::execl(KILN_SWITCH_BINARY, KILN_SWITCH_BINARY, "--listen", "127.0.0.1:0", "--switch", "a:nvue", "--switch",
                "b:eos", "--switch", "c:eos:DCS-7280CR3-32P4", "--password-env", "KILN_TEST_SWITCH_BIN_PASSWORD",
                "--state-dir", dir.path().c_str(), "--fault", "b:fail-applies=all", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(out[1]);
    // Three lines, "switch <name> (<os>): <url>", once all listen.
    std::string text;
    char buf[512];
    while (std::count(text.begin(), text.end(), '\n') < 3) {
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    INFO(text);
    const auto a = text.find("switch a (nvue): http://127.0.0.1:");
    const auto b = text.find("switch b (eos): http://127.0.0.1:");
    REQUIRE(a != std::string::npos);
    REQUIRE(b != std::string::npos);
    const std::string url_b = text.substr(text.find("http://", b), text.find('\n', b) - text.find("http://", b));
    const auto c = text.find("switch c (eos): http://127.0.0.1:");
    REQUIRE(c != std::string::npos);
    const std::string url_c = text.substr(text.find("http://", c), text.find('\n', c) - text.find("http://", c));

    kiln::net::CurlHttpClient http;
    kiln::net::HttpRequest req;
    req.url = url_b + "/_emulator/faults";
    req.basic_user = "admin";
    req.basic_password = "pw";
    auto faults = http.send(req);
    REQUIRE(faults);
    CHECK(faults->status == 200);
    CHECK(json::parse(faults->body)["fail_applies"] == -1);
    req.url = url_b + "/_emulator/running";
    req.method = "POST";
    req.body = R"({"cmds": ["interface Ethernet1/1", "mtu 1500"]})";
    auto changed = http.send(req);
    REQUIRE(changed);
    CHECK(changed->status == 200);
    // The third field of --switch is the model show version reports.
    req.url = url_c + "/command-api";
    req.body =
        R"({"jsonrpc": "2.0", "method": "runCmds", "id": 1, "params": {"version": 1, "cmds": ["show version"]}})";
    auto version = http.send(req);
    REQUIRE(version);
    CHECK(json::parse(version->body)["result"][0]["modelName"] == "DCS-7280CR3-32P4");

    ::kill(pid, SIGTERM);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::close(out[0]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(kiln::test::read_file(dir.file("b.json")).find("mtu 1500") != std::string::npos);
}

TEST_CASE("kiln-switch: refuses an unknown os and a missing password") {
    int out[2];
    REQUIRE(::pipe(out) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(out[1], 2);
        ::close(out[0]);
        ::unsetenv("KILN_SWITCH_PASSWORD");
        ::execl(KILN_SWITCH_BINARY, KILN_SWITCH_BINARY, "--switch", "a:nvue", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(out[1]);
    std::string err;
    char buf[512];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WEXITSTATUS(status) == 1);
    CHECK_THAT(err, Catch::Contains("KILN_SWITCH_PASSWORD"));
}
