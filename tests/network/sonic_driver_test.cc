#include <filesystem>
#include <map>
#include <set>

#include <catch2/catch.hpp>
#include <fstream>

#include "network/config_tree.h"
#include "network/sonic/json_patch.h"
#include "network/sonic/managed_scope.h"
#include "network/sonic/sonic_driver.h"
#include "network/ssh_control.h"
#include "tests/network/network_test_util.h"
#include "tests/network/sonic_test_support.h"

using nlohmann::json;
using namespace kiln;
using namespace kiln::network;
using namespace kiln::network::sonic;
namespace tn = kiln::test::network;

namespace {

// Runs the switch's argv in kiln-sonic-sim on this machine (no SSH).
class LocalSimRunner : public CommandRunner {
public:
    explicit LocalSimRunner(std::string state) : state_(std::move(state)) {}
    Result<CommandResult> run(const CommandSpec& spec) override {
        calls.push_back(spec.argv);
        CommandSpec s = spec;
        s.argv = {KILN_SIM, "--state", state_, "--yang", KILN_SONIC_YANG_TEST_DIR};
        s.argv.insert(s.argv.end(), spec.argv.begin(), spec.argv.end());
        return real_.run(s);
    }
    std::vector<std::vector<std::string>> calls;

private:
    static constexpr const char* KILN_SIM = KILN_SONIC_SIM;
    std::string state_;
    ProcessRunner real_;
};

// Answers from a script: exit codes per subcommand; records argv and stdin.
class ScriptedRunner : public CommandRunner {
public:
    Result<CommandResult> run(const CommandSpec& spec) override {
        calls.push_back(spec.argv);
        stdins.push_back(spec.stdin_data);
        CommandResult r;
        const std::string sub = spec.argv.size() > 2 ? spec.argv[2] : "";
        r.exit_code = fail.count(sub) ? 1 : 0;
        if (r.exit_code) r.err = "Error: " + sub + " went wrong\n";
        return r;
    }
    std::set<std::string> fail;
    std::vector<std::vector<std::string>> calls;
    std::vector<std::string> stdins;
};

struct StateDir {
    std::string path;
    StateDir() {
        std::string t = (std::filesystem::temp_directory_path() / "kiln-sonic-drv-XXXXXX").string();
        path = mkdtemp(t.data());
        tn::seed_state(path);
    }
    ~StateDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

const ConfigChange* find_change(const std::vector<ConfigChange>& cs, const std::string& path) {
    for (const auto& c : cs)
        if (c.path == path) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("select_managed keeps only kiln's tables, entries and ports") {
    json db = tn::stock_config();
    db["DSCP_TO_TC_MAP"]["ROCE"]["26"] = "3";
    const json m = select_managed(db, {"Ethernet0", "Ethernet4"});
    CHECK_FALSE(m.contains("DEVICE_METADATA"));
    CHECK(m["DSCP_TO_TC_MAP"].size() == 1);  // ROCE, not AZURE
    CHECK(m["PORT"].size() == 2);
    CHECK(m["QUEUE"].contains("Ethernet4|3-4"));
    CHECK_FALSE(m["QUEUE"].contains("Ethernet8|3-4"));
    CHECK(m["SCHEDULER"].empty());  // the table exists on the switch, kiln's entries do not
    CHECK(m["BUFFER_PROFILE"].contains("pg_lossless_400000_5m_profile"));
    CHECK_FALSE(m["BUFFER_PROFILE"].contains("ingress_lossy_profile"));
}

TEST_CASE("the sonic diff names port and field and leaves unmanaged settings alone") {
    SonicDriver d("leaf1", std::make_shared<ScriptedRunner>());
    auto desired = d.render(tn::roce_profile(), make_ports(4));
    REQUIRE(desired);
    const json running = select_managed(tn::stock_config(), {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"});
    const auto changes = d.diff(*desired, running);

    const ConfigChange* mtu = find_change(changes, "PORT|Ethernet8/mtu");
    REQUIRE(mtu);
    CHECK(mtu->port == "Ethernet8");
    CHECK(mtu->field == "mtu");
    CHECK(mtu->running == "9100");
    CHECK(mtu->desired == "9216");
    CHECK_FALSE(find_change(changes, "PORT|Ethernet8/fec"));  // the switch's own setting
    const ConfigChange* pfc = find_change(changes, "PORT_QOS_MAP|Ethernet0/pfc_enable");
    REQUIRE(pfc);
    CHECK(pfc->running == "3,4");
    CHECK(pfc->desired == "3");
    const ConfigChange* map = find_change(changes, "PORT_QOS_MAP|Ethernet0/dscp_to_tc_map");
    REQUIRE(map);
    CHECK(map->running == "AZURE");
    // The stock queue range 3-4 overlaps kiln's queue 3: removed. 0-2 does not: kept.
    const ConfigChange* q = find_change(changes, "QUEUE|Ethernet4|3-4/wred_profile");
    REQUIRE(q);
    CHECK(q->desired.is_null());
    CHECK(q->field == "queue 3-4 wred_profile");
    CHECK_FALSE(find_change(changes, "QUEUE|Ethernet4|0-2/scheduler"));
    const ConfigChange* dscp = find_change(changes, "DSCP_TO_TC_MAP|ROCE/26");
    REQUIRE(dscp);
    CHECK(dscp->port.empty());
    CHECK(dscp->desired == "3");

    CHECK(d.diff(*desired, *desired).empty());
    CHECK(d.patch_for(*desired, *desired).empty());
}

TEST_CASE("one tree diff: owned levels name what only the switch has, other levels leave it alone") {
    const json desired = {{"T", {{"a", {{"x", "1"}}}}}};
    const json running = {{"T", {{"a", {{"x", "2"}, {"y", "3"}}}, {"b", {{"z", "4"}}}, {"c", json::object()}}},
                          {"U", json::object()}};
    auto paths = [](const std::vector<ConfigChange>& cs) {
        std::vector<std::string> out;
        for (const auto& c : cs) out.push_back(c.path + "=" + c.desired.dump() + "<-" + c.running.dump());
        return out;
    };
    // NVUE's and EOS's rule: only desired's leaves.
    CHECK(paths(diff_trees(desired, running, {})) == std::vector<std::string>{"T/a/x=\"1\"<-\"2\""});
    // SONiC's: every level owned; an owned member only the switch has goes
    // leaf by leaf, after the members kiln renders; empty objects hold nothing.
    TreeDiffOptions all;
    all.owned_from_depth = 0;
    CHECK(paths(diff_trees(desired, running, all)) ==
          std::vector<std::string>{"T/a/x=\"1\"<-\"2\"", "T/a/y=null<-\"3\"", "T/b/z=null<-\"4\""});
    // Owned from the entries down: extra fields go, extra entries stay.
    TreeDiffOptions entries;
    entries.owned_from_depth = 2;
    CHECK(paths(diff_trees(desired, running, entries)) ==
          std::vector<std::string>{"T/a/x=\"1\"<-\"2\"", "T/a/y=null<-\"3\""});
}

TEST_CASE("the sonic diff names exactly the fields its patch changes") {
    SonicDriver d("leaf1", std::make_shared<ScriptedRunner>());
    auto desired = d.render(tn::roce_profile(), make_ports(4));
    REQUIRE(desired);
    const json running = select_managed(tn::stock_config(), {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"});
    const json scoped = scope_to_desired(running, *desired);
    auto patched = json_patch_apply(scoped, d.patch_for(*desired, running));
    REQUIRE(patched);
    // Every TABLE|key/field whose value the patch changes (or adds, or removes).
    std::set<std::string> changed;
    auto leaves = [](const json& doc, std::map<std::string, json>& out) {
        for (const auto& [t, entries] : doc.items())
            for (const auto& [k, fields] : entries.items())
                for (const auto& [f, v] : fields.items()) out[t + "|" + k + "/" + f] = v;
    };
    std::map<std::string, json> before, after;
    leaves(scoped, before);
    leaves(*patched, after);
    for (const auto& [p, v] : before)
        if (!after.count(p) || after[p] != v) changed.insert(p);
    for (const auto& [p, v] : after)
        if (!before.count(p)) changed.insert(p);
    std::set<std::string> named;
    for (const auto& c : d.diff(*desired, running)) CHECK(named.insert(c.path).second);
    CHECK(changed.size() > 10);
    CHECK(named == changed);
}

TEST_CASE("the sonic patch never replaces a table or entry the switch already has") {
    SonicDriver d("leaf1", std::make_shared<ScriptedRunner>());
    auto desired = d.render(tn::roce_profile(), make_ports(4));
    REQUIRE(desired);
    const json stock = tn::stock_config();
    const json patch =
        d.patch_for(*desired, select_managed(stock, {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"}));
    for (const auto& op : patch) {
        auto tokens = split_pointer(op["path"].get<std::string>());
        REQUIRE(tokens);
        INFO(op.dump());
        if (op["op"] == "add" && tokens->size() == 1) CHECK_FALSE(stock.contains(tokens->at(0)));
        if (op["op"] == "add" && tokens->size() == 2) CHECK_FALSE(stock[tokens->at(0)].contains(tokens->at(1)));
    }
    // Applied to the whole stock config, the managed part equals the render, and nothing else moved.
    auto after = json_patch_apply(stock, patch);
    REQUIRE(after);
    CHECK((*after)["PORT"]["Ethernet0"]["fec"] == "rs");
    CHECK((*after)["DSCP_TO_TC_MAP"]["AZURE"] == stock["DSCP_TO_TC_MAP"]["AZURE"]);
    CHECK((*after)["DEVICE_METADATA"] == stock["DEVICE_METADATA"]);
    CHECK(d.diff(*desired, select_managed(*after, {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"})).empty());
}

TEST_CASE("sonic apply checkpoints, patches over stdin and drops the checkpoint") {
    auto runner = std::make_shared<ScriptedRunner>();
    SonicDriver d("leaf1", runner);
    const json patch = json::parse(R"([{"op":"replace","path":"/PORT/Ethernet0/mtu","value":"9216"}])");
    REQUIRE(d.apply_patch(patch));
    REQUIRE(runner->calls.size() == 3);
    CHECK(runner->calls[0].at(0) == "sudo");
    CHECK(runner->calls[0].at(2) == "checkpoint");
    const std::string cp = runner->calls[0].at(3);
    CHECK(cp.rfind("kiln-", 0) == 0);
    CHECK(runner->calls[1] == std::vector<std::string>{"sudo", "config", "apply-patch", "/dev/stdin"});
    CHECK(json::parse(runner->stdins[1]) == patch);
    CHECK(runner->calls[2] == std::vector<std::string>{"sudo", "config", "delete-checkpoint", cp});
}

TEST_CASE("a failed sonic apply rolls back and says so") {
    auto runner = std::make_shared<ScriptedRunner>();
    runner->fail = {"apply-patch"};
    SonicDriver d("leaf1", runner);
    Status s = d.apply_patch(json::array({{{"op", "remove"}, {"path", "/X"}}}));
    REQUIRE_FALSE(s);
    CHECK(s.error().code == "network.apply_failed");
    CHECK(s.error().message.find("switch leaf1") != std::string::npos);
    CHECK(s.error().message.find("rolled back to checkpoint kiln-") != std::string::npos);
    CHECK(s.error().message.find("apply-patch went wrong") != std::string::npos);
    REQUIRE(runner->calls.size() == 4);
    CHECK(runner->calls[2].at(2) == "rollback");
    CHECK(runner->calls[3].at(2) == "delete-checkpoint");

    runner->calls.clear();
    runner->fail = {"apply-patch", "rollback"};
    s = d.apply_patch(json::array({{{"op", "remove"}, {"path", "/X"}}}));
    REQUIRE_FALSE(s);
    CHECK(s.error().code == "network.rollback_failed");
    CHECK(s.error().message.find("is kept") != std::string::npos);
    CHECK(runner->calls.size() == 3);  // the checkpoint stays for the operator

    runner->calls.clear();
    runner->fail = {"checkpoint"};
    s = d.apply_patch(json::array({{{"op", "remove"}, {"path", "/X"}}}));
    REQUIRE_FALSE(s);
    CHECK(s.error().message.find("nothing was changed") != std::string::npos);
    CHECK(runner->calls.size() == 1);
}

TEST_CASE("sonic driver converges the stock config through kiln-sonic-sim") {
    StateDir state;
    auto runner = std::make_shared<LocalSimRunner>(state.path);
    SonicDriverOptions opt;
    opt.sudo = false;
    SonicDriver d("leaf1", runner, opt);
    const auto ports = make_ports(4);
    auto running = d.read_running(ports);
    REQUIRE(running);
    // As the network stage does: the SKU's headroom table, read from the switch.
    auto desired = d.render_for(tn::roce_profile(), ports, *running);
    REQUIRE(desired);
    REQUIRE_FALSE(d.diff(*desired, *running).empty());
    REQUIRE(d.check(*desired, *running));
    // The ports kiln says will go down and up are the ones the switch cycles.
    std::set<std::string> predicted;
    for (const auto& c : d.diff(*desired, *running))
        if (c.disruptive) predicted.insert(c.port);
    CHECK(predicted == std::set<std::string>{"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"});
    Status s = d.apply(*desired, *running);
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s);
    auto after = d.read_running(ports);
    REQUIRE(after);
    CHECK(d.diff(*desired, *after).empty());
    const json full = tn::read_json(state.path + "/config_db.json");
    CHECK(full["DSCP_TO_TC_MAP"]["ROCE"]["26"] == "3");
    CHECK(full["PORT_QOS_MAP"]["Ethernet12"]["dscp_to_tc_map"] == "ROCE");
    CHECK(full["PORT_QOS_MAP"]["Ethernet12"]["pfc_enable"] == "3");
    // The stock lossless PG range gives way to kiln's, named as buffermgrd names it.
    CHECK_FALSE(full["BUFFER_PG"].contains("Ethernet0|3-4"));
    CHECK(full["BUFFER_PG"]["Ethernet0|3"]["profile"] == "pg_lossless_400000_5m_profile");
    CHECK(full["BUFFER_PROFILE"]["pg_lossless_400000_5m_profile"]["xoff"] == "231424");
    CHECK(full["CABLE_LENGTH"]["AZURE"]["Ethernet0"] == "5m");
    CHECK(full["BUFFER_PG"]["Ethernet0|0"]["profile"] == "ingress_lossy_profile");
    CHECK(tn::checkpoints_in(state.path).empty());
    std::set<std::string> cycled;
    {
        std::ifstream log(state.path + "/port_flaps.log");
        for (std::string line; std::getline(log, line);) cycled.insert(line);
    }
    CHECK(cycled == predicted);
    // Converged: apply runs nothing.
    runner->calls.clear();
    REQUIRE(d.apply(*desired, *after));
    CHECK(runner->calls.empty());
}

TEST_CASE("sonic driver refuses, before apply, what the switch would refuse") {
    StateDir state;
    auto runner = std::make_shared<LocalSimRunner>(state.path);
    SonicDriverOptions opt;
    opt.sudo = false;
    SonicDriver d("leaf1", runner, opt);
    const json stock = tn::read_json(state.path + "/config_db.json");
    auto plan = [&](const kiln::network::RoceProfile& p, const std::vector<kiln::network::Port>& ports) {
        auto running = d.read_running(ports);
        REQUIRE(running);
        auto desired = d.render_for(p, ports, *running);
        REQUIRE(desired);
        return d.check(*desired, *running);
    };
    SECTION("lanes the switch created otherwise (an 8-lane port) are create-only") {
        auto ports = make_ports(4, 400000, 8);  // Ethernet0, Ethernet8, ...: Ethernet0 gets lanes 0-7
        ports.resize(1);
        Status s = plan(tn::roce_profile(), ports);
        REQUIRE_FALSE(s);
        CHECK(s.error().code == "network.create_only");
        CHECK_THAT(s.error().message, Catch::Contains("PORT|Ethernet0 lanes are 0,1,2,3 on the switch"));
        CHECK(tn::read_json(state.path + "/config_db.json") == stock);
    }
    SECTION("a value SONiC's models refuse on the merged config") {
        auto p = tn::roce_profile();
        p.switch_mtu = 9500;
        Status s = plan(p, make_ports(4));
        REQUIRE_FALSE(s);
        CHECK(s.error().code == "network.yang_invalid");
        CHECK_THAT(s.error().message, Catch::Contains("PORT|Ethernet0: mtu") && Catch::Contains("nothing was applied"));
        CHECK(tn::read_json(state.path + "/config_db.json") == stock);
    }
    SECTION("a switch polling every 400 ms: kiln's poll interval comes with its detection time") {
        json db = stock;
        db["PFC_WD"]["GLOBAL"]["POLL_INTERVAL"] = "400";
        for (const char* port : {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"}) {
            db["PFC_WD"][port]["detection_time"] = "400";
            db["PFC_WD"][port]["restoration_time"] = "400";
        }
        tn::write_json(state.path + "/config_db.json", db);
        const auto ports = make_ports(4);
        REQUIRE(plan(tn::roce_profile(), ports));  // detection 200 with POLL_INTERVAL 200: valid
        auto running = d.read_running(ports);
        REQUIRE(running);
        auto desired = d.render_for(tn::roce_profile(), ports, *running);
        REQUIRE(desired);
        REQUIRE(d.apply(*desired, *running));
        const json after = tn::read_json(state.path + "/config_db.json");
        CHECK(after["PFC_WD"]["GLOBAL"]["POLL_INTERVAL"] == "200");
        CHECK(after["PFC_WD"]["Ethernet0"]["detection_time"] == "200");
    }
}

TEST_CASE("sonic driver from_switch maps the fleet switch to ssh") {
    config::Switch sw;
    sw.name = "leaf1";
    sw.os = "sonic";
    sw.address = "192.0.2.10:2222";
    sw.ssh_key = "/keys/id";
    sw.known_hosts = "/keys/known_hosts";
    auto d = SonicDriver::from_switch(sw);
    REQUIRE(d);
    CHECK((*d)->os() == "sonic");

    sw.known_hosts.clear();
    auto e = SonicDriver::from_switch(sw);
    REQUIRE_FALSE(e);
    CHECK(e.error().code == "network.ssh_no_known_hosts");
    sw.known_hosts = "/keys/known_hosts";
    sw.ssh_key.clear();
    sw.password = *Secret::parse("env:LEAF_PASS", "/");
    e = SonicDriver::from_switch(sw);
    REQUIRE_FALSE(e);
    CHECK(e.error().code == "network.ssh_password_unsupported");
    CHECK(e.error().message.find("LEAF_PASS") == std::string::npos);
    sw.os = "nvue";
    CHECK_FALSE(SonicDriver::from_switch(sw));
    sw.os = "sonic";
    sw.password.reset();
    sw.address = "leaf1;reboot";
    CHECK_FALSE(SonicDriver::from_switch(sw));
}

TEST_CASE("ssh runner builds a strict ssh command line from safe tokens only") {
    SshTarget t;
    t.host = "192.0.2.10";
    t.port = 2222;
    t.username = "admin";
    t.identity_file = "/keys/id";
    t.known_hosts = "/keys/kh";
    SshRunner r(t, std::make_shared<ScriptedRunner>());
    auto argv = r.ssh_argv({"sudo", "config", "apply-patch", "/dev/stdin"});
    REQUIRE(argv);
    const std::string line = describe_argv(*argv);
    for (const char* want : {"BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/keys/kh",
                             "ConnectTimeout=10", "-i /keys/id", "-p 2222", "-l admin"})
        CHECK(line.find(want) != std::string::npos);
    CHECK(argv->back() == "sudo config apply-patch /dev/stdin");
    CHECK((*argv)[argv->size() - 2] == "192.0.2.10");
    for (const char* bad : {"a;b", "$(reboot)", "it's", "a b", "`x`", "~root", "x>y", "", "a\nb", "*"})
        CHECK_FALSE(r.ssh_argv({"config", bad}));

    // Pooled: a master per target, its socket in the process's private directory.
    for (const char* want : {"-o ControlMaster=auto", "-o ControlPersist=60", "-o ServerAliveInterval=15"})
        CHECK(line.find(want) != std::string::npos);
    auto control_path = [](const std::vector<std::string>& a) {
        for (const auto& arg : a)
            if (arg.rfind("ControlPath=", 0) == 0) return arg.substr(12);
        return std::string();
    };
    const std::string socket = control_path(*argv);
    REQUIRE_FALSE(ssh_control_dir().empty());
    CHECK(socket.rfind(ssh_control_dir() + "/", 0) == 0);
    CHECK(socket.size() < 100);  // a unix socket path's limit, with room for ssh's temporary suffix
    // The options come before the identity, port and user, which stay together for the host's runner test.
    CHECK(line.find("ControlPath=") < line.find("-i /keys/id -p 2222 -l admin -- 192.0.2.10"));
    // The same target from another runner shares the master; a different
    // pinned host key or identity never does.
    CHECK(control_path(*SshRunner(t, std::make_shared<ScriptedRunner>()).ssh_argv({"config"})) == socket);
    SshTarget other_keys = t;
    other_keys.known_hosts = "/keys/other_kh";
    CHECK(control_path(*SshRunner(other_keys, std::make_shared<ScriptedRunner>()).ssh_argv({"config"})) != socket);
    other_keys = t;
    other_keys.identity_file = "/keys/other_id";
    CHECK(control_path(*SshRunner(other_keys, std::make_shared<ScriptedRunner>()).ssh_argv({"config"})) != socket);
    // Unpooled: none of it.
    SshTarget fresh = t;
    fresh.multiplex = false;
    auto unpooled = SshRunner(fresh, std::make_shared<ScriptedRunner>()).ssh_argv({"config"});
    REQUIRE(unpooled);
    CHECK(describe_argv(*unpooled).find("Control") == std::string::npos);
    CHECK(describe_argv(*unpooled).find("ServerAlive") == std::string::npos);

    t.known_hosts.clear();
    CHECK_FALSE(SshRunner(t, std::make_shared<ScriptedRunner>()).ssh_argv({"config"}));

    auto a = SshTarget::from_address("[2001:db8::1]:830");
    REQUIRE(a);
    CHECK(a->host == "2001:db8::1");
    CHECK(a->port == 830);
    CHECK(SshTarget::from_address("leaf1")->port == 22);
    CHECK_FALSE(SshTarget::from_address("leaf1:0"));
    CHECK_FALSE(SshTarget::from_address("leaf1:x"));
    CHECK_FALSE(SshTarget::from_address("2001:db8::1"));
    CHECK_FALSE(SshTarget::from_address("-oProxyCommand=x"));
}
