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

std::unique_ptr<EmulatedSwitch> open_switch(const std::string& os, const std::string& state_file = "") {
    SwitchSpec spec;
    spec.name = "sw";
    spec.os = os;
    spec.password = "pw";
    spec.state_file = state_file;
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
    CHECK(refused.error().code == "state_malformed");
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
                "b:eos", "--password-env", "KILN_TEST_SWITCH_BIN_PASSWORD", "--state-dir", dir.path().c_str(),
                "--fault", "b:fail-applies=all", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(out[1]);
    // Two lines, "switch <name> (<os>): <url>", once both listen.
    std::string text;
    char buf[512];
    while (std::count(text.begin(), text.end(), '\n') < 2) {
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
