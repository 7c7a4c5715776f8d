// The SONiC driver over real SSH: sshd in a network namespace (the
// kiln_sonic_ssh ctest fixture, tests/network/sonic_ssh_target.sh) forcing
// every session into kiln-sonic-sim, which validates patches with SONiC's
// YANG models, and the pooling of SSH connections (connections counted in
// sshd's log). Run by hand: sonic_ssh_target.sh start DIR build/kiln-sonic-sim,
// then KILN_SONIC_SSH_TARGET_DIR=DIR kiln_sonic_ssh_tests.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include <catch2/catch.hpp>

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

std::string target_dir() {
    const char* env = std::getenv("KILN_SONIC_SSH_TARGET_DIR");
    return env ? env : KILN_SONIC_SSH_TARGET_DIR;
}

std::map<std::string, std::string> target_env() {
    std::map<std::string, std::string> out;
    std::ifstream in(target_dir() + "/target.env");
    std::string line;
    while (std::getline(in, line))
        if (auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    return out;
}

// The fleet switch as an operator would write it for this target.
config::Switch fleet_switch(const std::map<std::string, std::string>& env) {
    config::Switch sw;
    sw.name = "leaf1";
    sw.os = "sonic";
    sw.address = env.at("PORT") == "22" ? env.at("HOST") : env.at("HOST") + ":" + env.at("PORT");
    sw.username = env.at("USER");
    sw.ssh_key = env.at("IDENTITY");
    sw.known_hosts = env.at("KNOWN_HOSTS");
    return sw;
}

struct Target {
    std::map<std::string, std::string> env = target_env();
    std::string state;
    std::unique_ptr<SonicDriver> driver;
    std::vector<Port> ports = make_ports(4);

    Target() {
        REQUIRE(env.count("HOST"));
        state = env.at("STATE");
        // Each test starts from the stock config, with no checkpoints.
        tn::seed_state(state);
        for (const auto& cp : tn::checkpoints_in(state)) std::remove((state + "/checkpoints/" + cp).c_str());
        auto d = SonicDriver::from_switch(fleet_switch(env));
        REQUIRE(d);
        driver = std::move(*d);
    }
    json config() const { return tn::read_json(state + "/config_db.json"); }
};

// The switch as an SshTarget, for runners built directly.
SshTarget ssh_target(const std::map<std::string, std::string>& env) {
    auto t = SshTarget::from_address(env.at("PORT") == "22" ? env.at("HOST") : env.at("HOST") + ":" + env.at("PORT"));
    REQUIRE(t);
    t->username = env.at("USER");
    t->identity_file = env.at("IDENTITY");
    t->known_hosts = env.at("KNOWN_HOSTS");
    return *t;
}

// SSH connections sshd has accepted so far (one line each in its -E log).
int accepted_connections() {
    std::ifstream in(target_dir() + "/sshd.log");
    int n = 0;
    std::string line;
    while (std::getline(in, line)) n += line.rfind("Accepted publickey for ", 0) == 0;
    return n;
}

// What the driver reads from a switch: its CONFIG_DB.
Result<CommandResult> show(SshRunner& r, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    CommandSpec spec;
    spec.argv = {"sonic-cfggen", "-d", "--print-data"};
    spec.timeout = timeout;
    spec.kill_grace = std::chrono::seconds(1);
    return r.run(spec);
}

void require_shown(const Result<CommandResult>& r) {
    REQUIRE(r);
    INFO(r->err);
    REQUIRE(r->success());
    CHECK(r->out.find("\"PORT\"") != std::string::npos);
}

std::string control_path(const SshRunner& r) {
    auto argv = r.ssh_argv({"true"});
    REQUIRE(argv);
    for (const auto& a : *argv)
        if (a.rfind("ControlPath=", 0) == 0) return a.substr(12);
    return "";
}

// The master's pid as it reports it (`ssh -O check`); 0 when none answers.
pid_t master_pid(const std::string& socket) {
    ProcessRunner local;
    CommandSpec spec;
    spec.argv = {"ssh", "-F", "none", "-o", "ControlPath=" + socket, "-O", "check", "kiln-test"};
    spec.timeout = std::chrono::seconds(5);
    auto r = local.run(spec);
    if (!r || !r->success()) return 0;
    const auto at = r->err.find("pid=");
    return at == std::string::npos ? 0 : static_cast<pid_t>(std::atoi(r->err.c_str() + at + 4));
}

// Gone or a zombie (a backgrounded master is init's child, reaped on init's time).
bool process_ended(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return true;
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

// Waits (bounded) for a process kiln signalled or told to exit to end.
bool ended_within_10s(pid_t pid) {
    for (int i = 0; i < 500; ++i) {
        if (process_ended(pid)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

// A runner to the target whose master is up after one command: its
// socket and the master's pid.
struct RunningMaster {
    SshRunner runner;
    std::string socket;
    pid_t pid = 0;
};
RunningMaster start_master(const std::map<std::string, std::string>& env) {
    close_ssh_masters();
    RunningMaster m{SshRunner(ssh_target(env), std::make_shared<ProcessRunner>()), "", 0};
    require_shown(show(m.runner));
    m.socket = control_path(m.runner);
    m.pid = master_pid(m.socket);
    REQUIRE(m.pid > 0);
    return m;
}

const ConfigChange* find_change(const std::vector<ConfigChange>& cs, const std::string& port,
                                const std::string& field) {
    for (const auto& c : cs)
        if (c.port == port && c.field == field) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("sonic over ssh converges a 4-port switch from the stock config") {
    Target t;
    auto desired = t.driver->render(tn::roce_profile(), t.ports);
    REQUIRE(desired);
    auto running = t.driver->read_running(t.ports);
    REQUIRE(running);
    CHECK((*running)["PORT_QOS_MAP"]["Ethernet0"]["dscp_to_tc_map"] == "AZURE");
    CHECK_FALSE(running->contains("DEVICE_METADATA"));
    const auto changes = t.driver->diff(*desired, *running);
    const ConfigChange* map = find_change(changes, "Ethernet0", "PORT_QOS_MAP dscp_to_tc_map");
    REQUIRE(map);
    CHECK(map->running == "AZURE");

    Status s = t.driver->apply(*desired, *running);
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s);

    const json full = t.config();
    // DSCP 26 now lands on the lossless TC 3 on every port; the stock map (26 -> 1) is no longer used.
    CHECK(full["DSCP_TO_TC_MAP"]["ROCE"]["26"] == "3");
    CHECK(full["DSCP_TO_TC_MAP"]["ROCE"]["48"] == "6");
    for (const auto& p : t.ports) {
        CHECK(full["PORT_QOS_MAP"][p.name]["dscp_to_tc_map"] == "ROCE");
        CHECK(full["PORT_QOS_MAP"][p.name]["pfc_enable"] == "3");
        CHECK(full["PORT"][p.name]["mtu"] == "9216");
        CHECK(full["PORT"][p.name]["fec"] == "rs");  // the switch's own setting survives
        CHECK(full["QUEUE"][p.name + "|3"]["wred_profile"] == "ROCE");
        CHECK_FALSE(full["QUEUE"].contains(p.name + "|3-4"));
        CHECK(full["QUEUE"][p.name + "|0-2"]["scheduler"] == "scheduler.0");
    }
    CHECK(full["DEVICE_METADATA"] == tn::stock_config()["DEVICE_METADATA"]);
    CHECK(tn::checkpoints_in(t.state).empty());

    auto after = t.driver->read_running(t.ports);
    REQUIRE(after);
    CHECK(t.driver->diff(*desired, *after).empty());
}

TEST_CASE("sonic over ssh: a patch the YANG models reject is rolled back") {
    Target t;
    const json before = t.config();
    // Valid first op, then an MTU SONiC's YANG bounds to 68..9216.
    const json patch = json::parse(R"([
        {"op":"replace","path":"/PORT/Ethernet0/mtu","value":"9216"},
        {"op":"replace","path":"/PORT/Ethernet4/mtu","value":"99999"}])");
    Status s = t.driver->apply_patch(patch);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == "network.apply_failed");
    CHECK(s.error().message.find("rolled back") != std::string::npos);
    CHECK(s.error().message.find("PORT|Ethernet4") != std::string::npos);
    CHECK(s.error().message.find("mtu") != std::string::npos);
    CHECK(t.config() == before);
    CHECK(tn::checkpoints_in(t.state).empty());

    // The same through apply(): a profile whose switch MTU the loader would refuse.
    auto profile = tn::roce_profile();
    profile.switch_mtu = 10000;
    auto desired = t.driver->render(profile, t.ports);
    REQUIRE(desired);
    auto running = t.driver->read_running(t.ports);
    REQUIRE(running);
    s = t.driver->apply(*desired, *running);
    REQUIRE_FALSE(s);
    CHECK(s.error().message.find("rolled back") != std::string::npos);
    CHECK(t.config() == before);
}

TEST_CASE("sonic over ssh: drift on one port is named and repaired") {
    Target t;
    auto desired = t.driver->render(tn::roce_profile(), t.ports);
    REQUIRE(desired);
    auto running = t.driver->read_running(t.ports);
    REQUIRE(running);
    REQUIRE(t.driver->apply(*desired, *running));

    // Behind kiln's back, as an operator's `config interface mtu Ethernet8 1500` would.
    json full = t.config();
    full["PORT"]["Ethernet8"]["mtu"] = "1500";
    tn::write_json(t.state + "/config_db.json", full);

    running = t.driver->read_running(t.ports);
    REQUIRE(running);
    const auto changes = t.driver->diff(*desired, *running);
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].port == "Ethernet8");
    CHECK(changes[0].field == "mtu");
    CHECK(changes[0].running == "1500");
    CHECK(changes[0].desired == "9216");
    CHECK(changes[0].describe() == "Ethernet8 mtu: 1500 -> 9216");
    CHECK(t.driver->patch_for(*desired, *running) ==
          json::parse(R"([{"op":"replace","path":"/PORT/Ethernet8/mtu","value":"9216"}])"));

    REQUIRE(t.driver->apply(*desired, *running));
    CHECK(t.config()["PORT"]["Ethernet8"]["mtu"] == "9216");
    running = t.driver->read_running(t.ports);
    REQUIRE(running);
    CHECK(t.driver->diff(*desired, *running).empty());
}

TEST_CASE("sonic over ssh refuses a switch whose host key does not match") {
    Target t;
    // A known_hosts pinning some other key for the target's address.
    const std::string kh = target_dir() + "/wrong_known_hosts";
    {
        std::ifstream in(t.env.at("IDENTITY") + ".pub");
        std::string type, key;
        in >> type >> key;
        std::string host =
            t.env.at("PORT") == "22" ? t.env.at("HOST") : "[" + t.env.at("HOST") + "]:" + t.env.at("PORT");
        std::ofstream(kh) << host << " " << type << " " << key << "\n";
    }
    auto sw = fleet_switch(t.env);
    sw.known_hosts = kh;
    auto d = SonicDriver::from_switch(sw);
    REQUIRE(d);
    auto r = (*d)->read_running(t.ports);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "network.read_failed");
    CHECK(r.error().message.find("ssh:") != std::string::npos);
    CHECK(r.error().transient);
}

TEST_CASE("sonic over ssh: commands to one switch ride one pooled connection") {
    Target t;
    close_ssh_masters();  // no master left from an earlier test in this process
    SshTarget target = ssh_target(t.env);
    const int before = accepted_connections();

    SshRunner pooled(target, std::make_shared<ProcessRunner>());
    for (int i = 0; i < 5; ++i) require_shown(show(pooled));
    CHECK(accepted_connections() - before == 1);
    // Another runner for the same switch (a later node's stage) rides it too.
    SshRunner later(target, std::make_shared<ProcessRunner>());
    require_shown(show(later));
    CHECK(accepted_connections() - before == 1);
    // The driver the product builds is pooled too.
    REQUIRE(t.driver->read_running(t.ports));
    CHECK(accepted_connections() - before == 1);
    // A target pinning another host key never rides the authenticated
    // connection: it connects itself, and its host key check fails.
    SshTarget wrong_key = target;
    wrong_key.known_hosts = target_dir() + "/empty_known_hosts";
    std::ofstream(wrong_key.known_hosts).close();
    SshRunner unverified(wrong_key, std::make_shared<ProcessRunner>());
    auto refused = show(unverified);
    REQUIRE(refused);
    CHECK(ssh_failed(*refused));

    // Unpooled: a connection per command.
    target.multiplex = false;
    SshRunner unpooled(target, std::make_shared<ProcessRunner>());
    for (int i = 0; i < 5; ++i) require_shown(show(unpooled));
    CHECK(accepted_connections() - before == 6);
    close_ssh_masters();
}

TEST_CASE("sonic over ssh: commands started together before a master exists all succeed, stderr clean") {
    Target t;
    close_ssh_masters();
    const SshTarget target = ssh_target(t.env);
    const int before = accepted_connections();
    constexpr int kTogether = 4;
    std::vector<Result<CommandResult>> results(kTogether, make_error("test", "test.not_run", "not run"));
    std::vector<std::thread> threads;
    for (int i = 0; i < kTogether; ++i)
        threads.emplace_back([&, i] {
            SshRunner r(target, std::make_shared<ProcessRunner>());
            results[i] = show(r);
        });
    for (auto& th : threads) th.join();
    for (const auto& r : results) {
        require_shown(r);
        CHECK(r->err.empty());  // no "ControlSocket ... already exists" from the ones that lost the race
    }
    const int opened = accepted_connections() - before;
    CHECK(opened >= 1);
    CHECK(opened <= kTogether);
    // After the burst they all share the one master left.
    SshRunner later(target, std::make_shared<ProcessRunner>());
    for (int i = 0; i < 3; ++i) require_shown(show(later));
    CHECK(accepted_connections() - before == opened);
    close_ssh_masters();
}

TEST_CASE("sonic over ssh: a master killed with SIGKILL does not fail the next command") {
    Target t;
    auto [r, socket, pid] = start_master(t.env);
    REQUIRE(::kill(pid, SIGKILL) == 0);
    REQUIRE(ended_within_10s(pid));
    struct stat st {};
    REQUIRE(::lstat(socket.c_str(), &st) == 0);  // the stale socket is still there
    CHECK(master_pid(socket) == 0);

    const int before = accepted_connections();
    require_shown(show(r));
    CHECK(accepted_connections() - before == 1);  // a new master, on the same path
    const pid_t next = master_pid(socket);
    CHECK(next > 0);
    CHECK(next != pid);
    require_shown(show(r));
    CHECK(accepted_connections() - before == 1);
    close_ssh_masters();
}

TEST_CASE("sonic over ssh: a command that times out on a hung master leaves the next one a fresh connection") {
    Target t;
    auto [r, socket, pid] = start_master(t.env);
    REQUIRE(::kill(pid, SIGSTOP) == 0);  // the master hangs: it accepts nothing more

    auto stuck = show(r, std::chrono::seconds(2));
    REQUIRE(stuck);
    CHECK(stuck->timed_out);
    const int before = accepted_connections();
    require_shown(show(r));
    CHECK(accepted_connections() - before == 1);
    CHECK(control_path(r) != socket);

    ::kill(pid, SIGCONT);
    close_ssh_masters();
    CHECK(ended_within_10s(pid));  // the retired master is closed too
}

TEST_CASE("sonic over ssh: the control directory is private and gone once the masters are closed") {
    Target t;
    close_ssh_masters();
    CHECK(ssh_control_dir().empty());
    SshRunner r(ssh_target(t.env), std::make_shared<ProcessRunner>());
    require_shown(show(r));
    const std::string dir = ssh_control_dir();
    REQUIRE_FALSE(dir.empty());
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 07777) == 0700);
    CHECK(st.st_uid == ::geteuid());
    CHECK(dir.find("/kiln-ssh-") != std::string::npos);
    const std::string socket = control_path(r);
    CHECK(socket.rfind(dir + "/", 0) == 0);
    REQUIRE(::lstat(socket.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    const pid_t pid = master_pid(socket);
    REQUIRE(pid > 0);

    close_ssh_masters();
    CHECK(::stat(dir.c_str(), &st) != 0);
    CHECK(ssh_control_dir().empty());
    CHECK(ended_within_10s(pid));

    // Commands after the close open a new master in a new directory.
    require_shown(show(r));
    CHECK_FALSE(ssh_control_dir().empty());
    close_ssh_masters();
}
