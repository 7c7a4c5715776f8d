// The NVUE and EOS drivers against kiln-switch's emulated switches on
// loopback: render, read back, diff, apply, a failed apply that leaves the
// previous config, drift named by port and field and repaired, timeouts and
// refused logins. And the driver factory's choice by `os`.
#include <catch2/catch.hpp>

#include "network/switch_drivers.h"
#include "provisioner/core/secret.h"
#include "tests/network/fabric_test_util.h"

using namespace kiln;
using namespace kiln::test::fabric;
using nlohmann::json;

namespace {

config::Switch fleet_switch(const std::string& name, const std::string& os, const std::string& url) {
    config::Switch sw;
    sw.name = name;
    sw.os = os;
    sw.address = url;
    sw.username = "admin";
    sw.password = *Secret::parse(std::string("env:") + kPasswordEnv, ".");
    return sw;
}

std::vector<network::Port> ports(std::initializer_list<const char*> names) {
    std::vector<network::Port> out;
    for (const char* n : names) {
        network::Port p;
        p.name = n;
        out.push_back(p);
    }
    return out;
}

std::unique_ptr<network::SwitchDriver> driver_for(const config::Switch& sw,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    network::SwitchDriverDeps deps;
    deps.http_timeout = timeout;
    deps.nvue.poll_interval = std::chrono::milliseconds(10);
    auto d = network::make_switch_driver(config::Fleet{}, sw, deps);
    REQUIRE(d);
    return std::move(*d);
}

// Converges the switch on `profile` for `ps` and checks nothing is left.
void converge(network::SwitchDriver& d, const config::RoceProfile& profile, const std::vector<network::Port>& ps) {
    auto desired = d.render(profile, ps);
    REQUIRE(desired);
    auto running = d.read_running(ps);
    REQUIRE(running);
    auto apply = d.apply(*desired, *running);
    INFO((apply ? std::string() : apply.error().str()));
    REQUIRE(apply);
    auto after = d.read_running(ps);
    REQUIRE(after);
    auto left = d.diff(*desired, *after);
    for (const auto& c : left) UNSCOPED_INFO(c.describe());
    CHECK(left.empty());
}

const network::ConfigChange* find_change(const std::vector<network::ConfigChange>& cs, const std::string& port,
                                         const std::string& field) {
    for (const auto& c : cs)
        if (c.port == port && c.field == field) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("nvue driver: a fresh switch differs, one apply converges it through a revision") {
    Emulators emu;
    const auto url = emu.start("leaf-n", "nvue");
    auto d = driver_for(fleet_switch("leaf-n", "nvue", url));
    config::RoceProfile profile;
    const auto ps = ports({"swp1", "swp2"});

    auto desired = d->render(profile, ps);
    REQUIRE(desired);
    CHECK((*desired)["qos"]["roce"]["mode"] == "lossless");
    CHECK((*desired)["qos"]["mapping"]["default-global"]["dscp"]["26"]["switch-priority"] == 3);
    CHECK((*desired)["qos"]["pfc"]["default-global"]["switch-priority"] == json{{"3", json::object()}});
    CHECK((*desired)["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"]["ecn"] == "enable");
    CHECK((*desired)["interface"]["swp2"]["link"]["mtu"] == 9216);

    auto running = d->read_running(ps);
    REQUIRE(running);
    auto changes = d->diff(*desired, *running);
    const auto* mtu = find_change(changes, "swp1", "mtu");
    REQUIRE(mtu);
    CHECK(mtu->path == "interface/swp1/link/mtu");
    CHECK(mtu->describe() == "swp1 mtu: (absent) -> 9216");

    converge(*d, profile, ps);
    const json applied = emu.get("leaf-n").running();
    CHECK(applied["interface"]["swp1"]["link"]["mtu"] == 9216);
    CHECK(applied["qos"]["roce"]["enable"] == "on");
}

TEST_CASE("nvue driver: a failed apply leaves the switch at its previous revision") {
    Emulators emu;
    const auto url = emu.start("leaf-n", "nvue");
    auto d = driver_for(fleet_switch("leaf-n", "nvue", url));
    config::RoceProfile profile;
    const auto ps = ports({"swp1"});
    converge(*d, profile, ps);
    const json before = emu.get("leaf-n").running();

    emu.get("leaf-n").set_faults({0, 1});
    profile.switch_mtu = 9000;
    auto desired = d->render(profile, ps);
    auto running = d->read_running(ps);
    REQUIRE(desired);
    REQUIRE(running);
    auto st = d->apply(*desired, *running);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == "nvue-apply-failed");
    CHECK_THAT(st.error().message, Catch::Contains("apply_fail") && Catch::Contains("stays at its previous revision"));
    CHECK(emu.get("leaf-n").running() == before);

    // The fault was for one apply: the next one goes through.
    converge(*d, profile, ps);
    CHECK(emu.get("leaf-n").running()["interface"]["swp1"]["link"]["mtu"] == 9000);
}

TEST_CASE("nvue driver: drift behind kiln's back is named by port and field, and repaired") {
    Emulators emu;
    const auto url = emu.start("leaf-n", "nvue");
    auto d = driver_for(fleet_switch("leaf-n", "nvue", url));
    config::RoceProfile profile;
    const auto ps = ports({"swp1", "swp2"});
    converge(*d, profile, ps);

    REQUIRE(emu.get("leaf-n").change_behind_back(
        {{"interface", {{"swp2", {{"link", {{"mtu", 1500}}}}}}},
         {"qos", {{"pfc", {{"default-global", {{"switch-priority", {{"4", json::object()}}}}}}}}}}));
    auto desired = d->render(profile, ps);
    auto running = d->read_running(ps);
    REQUIRE(running);
    auto changes = d->diff(*desired, *running);
    REQUIRE(changes.size() == 2);
    const auto* mtu = find_change(changes, "swp2", "mtu");
    REQUIRE(mtu);
    CHECK(mtu->running == 1500);
    CHECK(mtu->desired == 9216);
    // PFC on a priority the profile does not name is drift too.
    const auto* pfc = find_change(changes, "", "switch-priority");
    REQUIRE(pfc);
    CHECK(pfc->running.contains("4"));

    converge(*d, profile, ps);
    CHECK_FALSE(emu.get("leaf-n").running()["qos"]["pfc"]["default-global"]["switch-priority"].contains("4"));
}

TEST_CASE("eos driver: eAPI config session converges the switch: show running-config reads it back") {
    Emulators emu;
    const auto url = emu.start("leaf-e", "eos");
    auto d = driver_for(fleet_switch("leaf-e", "eos", url));
    config::RoceProfile profile;
    const auto ps = ports({"Ethernet1/1", "Ethernet2/1"});
    auto desired = d->render(profile, ps);
    REQUIRE(desired);
    CHECK((*desired)["interfaces"]["Ethernet1/1"]["mtu"] == 9214);  // EOS's ceiling, not 9216
    CHECK((*desired)["qos"]["dscp-map"]["26"] == 3);
    CHECK((*desired)["pfc-watchdog"]["timeout"] == "0.2");

    converge(*d, profile, ps);
    const json cmds = emu.get("leaf-e").running()["cmds"];
    CHECK(cmds.contains("qos map dscp 26 to traffic-class 3"));
    const json intf = cmds["interface Ethernet2/1"]["cmds"];
    CHECK(intf.contains("mtu 9214"));
    CHECK(intf.contains("priority-flow-control priority 3 no-drop"));
    CHECK(intf["tx-queue 3"]["cmds"].contains(
        "random-detect ecn minimum-threshold 150 kbytes maximum-threshold 1500 kbytes max-mark-probability 10"));
}

TEST_CASE("eos driver: a failed commit aborts the session and leaves the running config") {
    Emulators emu;
    const auto url = emu.start("leaf-e", "eos");
    auto d = driver_for(fleet_switch("leaf-e", "eos", url));
    config::RoceProfile profile;
    const auto ps = ports({"Ethernet1/1"});
    converge(*d, profile, ps);
    const json before = emu.get("leaf-e").running();

    emu.get("leaf-e").set_faults({0, 1});
    profile.switch_mtu = 9000;
    profile.host_mtu = 9000;
    auto desired = d->render(profile, ps);
    auto running = d->read_running(ps);
    REQUIRE(running);
    auto st = d->apply(*desired, *running);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == "eapi-error");
    CHECK_THAT(st.error().message, Catch::Contains("commit failed") && Catch::Contains("running config is unchanged"));
    CHECK(emu.get("leaf-e").running() == before);
    converge(*d, profile, ps);
}

TEST_CASE("eos driver: drift (an MTU and an extra no-drop priority) is named and repaired") {
    Emulators emu;
    const auto url = emu.start("leaf-e", "eos");
    auto d = driver_for(fleet_switch("leaf-e", "eos", url));
    config::RoceProfile profile;
    const auto ps = ports({"Ethernet1/1", "Ethernet2/1"});
    converge(*d, profile, ps);
    REQUIRE(emu.get("leaf-e").change_behind_back(
        {{"cmds", {"interface Ethernet2/1", "mtu 1500", "priority-flow-control priority 4 no-drop"}}}));
    auto running = d->read_running(ps);
    REQUIRE(running);
    auto changes = d->diff(*d->render(profile, ps), *running);
    REQUIRE(changes.size() == 2);
    REQUIRE(find_change(changes, "Ethernet2/1", "mtu"));
    CHECK(find_change(changes, "Ethernet2/1", "mtu")->running == 1500);
    REQUIRE(find_change(changes, "Ethernet2/1", "pfc-no-drop"));
    CHECK(find_change(changes, "Ethernet2/1", "pfc-no-drop")->running == json{3, 4});
    converge(*d, profile, ps);
    CHECK_FALSE(emu.get("leaf-e").running()["cmds"]["interface Ethernet2/1"]["cmds"].contains(
        "priority-flow-control priority 4 no-drop"));
}

TEST_CASE("switch drivers: a switch slower than the timeout is a transient http.timeout") {
    Emulators emu;
    const auto url = emu.start("leaf-slow", "eos");
    emu.get("leaf-slow").set_faults({1500, 0});
    auto d = driver_for(fleet_switch("leaf-slow", "eos", url), std::chrono::milliseconds(200));
    auto r = d->read_running(ports({"Ethernet1/1"}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "http.timeout");
    CHECK(r.error().transient);
    CHECK_THAT(r.error().message, Catch::Contains("leaf-slow"));
}

TEST_CASE("switch drivers: a wrong password is refused without the password in the message") {
    Emulators emu;
    const auto url = emu.start("leaf-n", "nvue");
    ::setenv("KILN_TEST_WRONG_PASSWORD", "not-the-password", 1);
    auto sw = fleet_switch("leaf-n", "nvue", url);
    sw.password = *Secret::parse("env:KILN_TEST_WRONG_PASSWORD", ".");
    auto d = driver_for(sw);
    auto r = d->read_running(ports({"swp1"}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "switch-auth");
    CHECK(r.error().message.find("not-the-password") == std::string::npos);
}

TEST_CASE("switch driver factory: picks by os and reports what each needs") {
    // The drivers resolve the password when they are made: set it here, as
    // ctest runs each case in a process of its own.
    ::setenv(kPasswordEnv, kPassword, 1);
    auto nvue = network::make_switch_driver(config::Fleet{}, fleet_switch("a", "nvue", "10.0.0.1"), {});
    REQUIRE(nvue);
    CHECK((*nvue)->os() == "nvue");
    auto eos = network::make_switch_driver(config::Fleet{}, fleet_switch("b", "eos", "10.0.0.2:8443"), {});
    REQUIRE(eos);
    CHECK((*eos)->os() == "eos");
    // SONiC goes over SSH with a pinned host key: without known_hosts it says so.
    auto sonic = network::make_switch_driver(config::Fleet{}, fleet_switch("c", "sonic", "10.0.0.3"), {});
    REQUIRE_FALSE(sonic);
    CHECK_THAT(sonic.error().message, Catch::Contains("known_hosts"));
    auto junos = network::make_switch_driver(config::Fleet{}, fleet_switch("d", "junos", "10.0.0.4"), {});
    REQUIRE_FALSE(junos);
    CHECK(junos.error().code == "unknown-os");
    auto nouser = fleet_switch("e", "nvue", "10.0.0.5");
    nouser.username.clear();
    auto e = network::make_switch_driver(config::Fleet{}, nouser, {});
    REQUIRE_FALSE(e);
    CHECK(e.error().code == "credentials");
}
