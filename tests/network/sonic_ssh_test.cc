// The SONiC driver over real SSH: sshd in a network namespace (the
// kiln_sonic_ssh ctest fixture, tests/network/sonic_ssh_target.sh) forcing
// every session into kiln-sonic-sim, which validates patches with SONiC's
// YANG models. Run by hand: sonic_ssh_target.sh start DIR build/kiln-sonic-sim,
// then KILN_SONIC_SSH_TARGET_DIR=DIR kiln_sonic_ssh_tests.
#include <cstdlib>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>

#include "network/sonic/sonic_driver.h"
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
    CHECK(s.error().code == "apply-failed");
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
    CHECK(r.error().code == "read-failed");
    CHECK(r.error().message.find("ssh:") != std::string::npos);
    CHECK(r.error().transient);
}
