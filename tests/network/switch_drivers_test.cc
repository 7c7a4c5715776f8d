// The NVUE and EOS drivers against kiln-switch's emulated switches on
// loopback: render, read back, diff, apply, a failed apply that leaves the
// previous config, drift named by port and field and repaired, timeouts and
// refused logins. And the driver factory's choice by `os`.
#include <catch2/catch.hpp>

#include <algorithm>

#include "network/eos/eos_driver.h"
#include "network/nvue/nvue_driver.h"
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
void converge(network::SwitchDriver& d, const network::RoceProfile& profile, const std::vector<network::Port>& ps) {
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
    network::RoceProfile profile;
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
    network::RoceProfile profile;
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
    CHECK(st.error().code == "network.nvue_apply_failed");
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
    network::RoceProfile profile;
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
    network::RoceProfile profile;
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

TEST_CASE("eos driver: the other DSCPs of the lossless TC's default block leave it") {
    // EOS maps DSCP 24-31 to TC 3 by default: left so, any of them would be
    // paused by PFC with RoCE. They go where best effort goes (TC 1).
    network::RoceProfile profile;
    REQUIRE(profile.lossless_priority == 3);
    REQUIRE(profile.roce_dscp == 26);
    auto desired = network::eos::render_eos(profile, ports({"Ethernet1/1"}));
    REQUIRE(desired);
    const json& map = (*desired)["qos"]["dscp-map"];
    CHECK(map["26"] == 3);
    CHECK(map[std::to_string(profile.cnp_dscp)] == profile.cnp_priority);
    for (int d : {24, 25, 27, 28, 29, 30, 31}) CHECK(map[std::to_string(d)] == 1);
    CHECK_FALSE(map.contains("23"));  // other blocks keep EOS's defaults
    CHECK_FALSE(map.contains("32"));
    // Lossless on TC 1 (best effort's own): the strays take the lowest free TC.
    profile.lossless_priority = 1;
    profile.pfc_priorities = {1};
    profile.roce_dscp = 3;
    auto low = network::eos::render_eos(profile, ports({"Ethernet1/1"}));
    REQUIRE(low);
    for (int d : {0, 1, 2, 4, 5, 6, 7}) CHECK((*low)["qos"]["dscp-map"][std::to_string(d)] == 0);
    CHECK((*low)["qos"]["dscp-map"]["3"] == 1);

    // EOS shows DSCPs of one TC on one line: read back, each is mapped.
    const json show = {{"cmds",
                        {{"qos map dscp 24 25 27 28 29 30 31 to traffic-class 1", nullptr},
                         {"qos map dscp 26 to traffic-class 3", nullptr}}}};
    const json running = network::eos::parse_running_config(show, ports({"Ethernet1/1"}));
    CHECK(running["qos"]["dscp-map"]["24"] == 1);
    CHECK(running["qos"]["dscp-map"]["31"] == 1);
    CHECK(running["qos"]["dscp-map"]["26"] == 3);
    CHECK(running["qos"]["dscp-map"].size() == 8);
}

TEST_CASE("eos driver: a failed commit aborts the session and leaves the running config") {
    Emulators emu;
    const auto url = emu.start("leaf-e", "eos");
    auto d = driver_for(fleet_switch("leaf-e", "eos", url));
    network::RoceProfile profile;
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
    CHECK(st.error().code == "network.eapi_error");
    CHECK_THAT(st.error().message, Catch::Contains("commit failed") && Catch::Contains("running config is unchanged"));
    CHECK(emu.get("leaf-e").running() == before);
    converge(*d, profile, ps);
}

TEST_CASE("eos driver: drift (an MTU and an extra no-drop priority) is named and repaired") {
    Emulators emu;
    const auto url = emu.start("leaf-e", "eos");
    auto d = driver_for(fleet_switch("leaf-e", "eos", url));
    network::RoceProfile profile;
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
    CHECK(r.error().code == "network.switch_auth");
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
    CHECK(junos.error().code == "network.unknown_os");
    auto nouser = fleet_switch("e", "nvue", "10.0.0.5");
    nouser.username.clear();
    auto e = network::make_switch_driver(config::Fleet{}, nouser, {});
    REQUIRE_FALSE(e);
    CHECK(e.error().code == "network.credentials");
}

// ---- NVUE: RoCE mode's defaults, the watchdog per port, timing in polls ----

namespace {

const json& nvue_dscp(const json& tree) {
    return tree["qos"]["mapping"]["default-global"]["dscp"];
}

}  // namespace

TEST_CASE("nvue render: RoCE mode's defaults stay unless the profile writes its own") {
    network::RoceProfile profile;  // nothing written: kiln's defaults, RoCE mode's on NVUE
    auto t = network::nvue::render_nvue(profile, ports({"swp1"}));
    REQUIRE(t);
    const json& q = (*t)["qos"];
    CHECK(q["mapping"]["default-global"]["trust"] == "both");  // RoCE mode's pcp,dscp, not l3
    const json& ecn = q["congestion-control"]["default-global"]["traffic-class"]["3"];
    CHECK(ecn["probability"] == 100);  // not kiln's 10
    CHECK(ecn["min-threshold"] == 150000);
    CHECK(ecn["max-threshold"] == 1500000);
    // Only roce_dscp reaches the lossless priority: RoCE mode's 24..31 -> 3
    // is undone for the other seven, which go to priority 0.
    int lossless = 0;
    for (const auto& [d, e] : nvue_dscp(*t).items())
        if (e["switch-priority"] == 3) {
            ++lossless;
            CHECK(d == "26");
        }
    CHECK(lossless == 1);
    for (int d = 24; d < 32; ++d)
        if (d != 26) CHECK(nvue_dscp(*t)[std::to_string(d)]["switch-priority"] == 0);
    CHECK(nvue_dscp(*t)["48"]["switch-priority"] == 6);
    CHECK_FALSE(nvue_dscp(*t).contains("49"));  // the CNP block is RoCE mode's, left alone

    // Written keys override, one by one.
    profile.ecn_probability_pct = 7;
    profile.given.insert("ecn_probability_pct");
    auto p7 = network::nvue::render_nvue(profile, ports({"swp1"}));
    REQUIRE(p7);
    const json& e7 = (*p7)["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"];
    CHECK(e7["probability"] == 7);
    CHECK(e7["min-threshold"] == 150000);  // still RoCE mode's
    profile.ecn_min_kb = 100;
    profile.ecn_max_kb = 1000;
    profile.given.insert({"ecn_min_kb", "ecn_max_kb"});
    auto kb = network::nvue::render_nvue(profile, ports({"swp1"}));
    REQUIRE(kb);
    CHECK((*kb)["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"]["min-threshold"] == 102400);
    CHECK((*kb)["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"]["max-threshold"] == 1024000);

    // A written min above RoCE mode's max (the max left to RoCE mode) is refused.
    network::RoceProfile high;
    high.ecn_min_kb = 1490;
    high.given.insert("ecn_min_kb");
    auto bad = network::nvue::render_nvue(high, ports({"swp1"}));
    REQUIRE_FALSE(bad);
    CHECK(bad.error().code == "network.bad_profile");
}

TEST_CASE("nvue render: what the fleet file writes is what overrides RoCE mode") {
    for (const bool written : {false, true}) {
        auto fleet = write_fleet(
            fleet_toml({{"leaf-n", "nvue", "127.0.0.1:1", {"swp1"}}}, 1, written ? "ecn_probability_pct = 10\n" : ""));
        INFO(fleet->errors());
        REQUIRE(fleet->loaded.fleet);
        const auto& profile = kiln::network::network_profiles(*fleet->loaded.fleet)->at("roce");
        CHECK(profile.ecn_probability_pct == 10);  // the same value either way
        auto t = network::nvue::render_nvue(profile, ports({"swp1"}));
        REQUIRE(t);
        CHECK((*t)["qos"]["congestion-control"]["default-global"]["traffic-class"]["3"]["probability"] ==
              (written ? 10 : 100));
    }
}

TEST_CASE("nvue render: the watchdog is on per port, its detection time in whole polls") {
    network::RoceProfile profile;  // detection 200 ms
    auto t = network::nvue::render_nvue(profile, ports({"swp1", "swp2"}));
    REQUIRE(t);
    CHECK((*t)["interface"]["swp1"]["qos"]["pfc-watchdog"]["state"] == "enable");
    CHECK((*t)["interface"]["swp2"]["qos"]["pfc-watchdog"]["state"] == "enable");
    CHECK((*t)["qos"]["pfc-watchdog"] == json{{"polling-interval", 100}, {"robustness", 2}});

    struct Case {
        int detection_ms;
        int poll;
        int robustness;
    };
    for (const Case c : {Case{100, 100, 1}, Case{300, 100, 3}, Case{250, 125, 2}, Case{101, 101, 1},
                         Case{5000, 100, 50}, Case{60000, 100, 600}, Case{5001, 1667, 3}}) {
        auto timing = network::nvue::nvue_watchdog_timing(c.detection_ms);
        INFO(c.detection_ms);
        REQUIRE(timing);
        CHECK(timing->polling_interval_ms == c.poll);
        CHECK(timing->robustness == c.robustness);
        CHECK(timing->polling_interval_ms * timing->robustness == c.detection_ms);
    }
    // Below one poll, and a prime past the longest poll: no honest product.
    for (int ms : {50, 99, 5003}) {
        auto timing = network::nvue::nvue_watchdog_timing(ms);
        INFO(ms);
        REQUIRE_FALSE(timing);
        CHECK(timing.error().code == "network.bad_profile");
    }
    profile.pfc_watchdog_detection_ms = 5003;
    auto prime = network::nvue::render_nvue(profile, ports({"swp1"}));
    REQUIRE_FALSE(prime);
    CHECK_THAT(prime.error().message, Catch::Contains("5003"));

    // NVUE's watchdog only drops.
    network::RoceProfile alert;
    alert.pfc_watchdog_action = "alert";
    auto a = network::nvue::render_nvue(alert, ports({"swp1"}));
    REQUIRE_FALSE(a);
    CHECK(a.error().code == "network.bad_profile");
    CHECK_THAT(a.error().message, Catch::Contains("always drops"));
}

TEST_CASE("nvue driver: the watchdog is applied and read back, and turning it off behind kiln's back is drift") {
    Emulators emu;
    const auto url = emu.start("leaf-n", "nvue");
    auto d = driver_for(fleet_switch("leaf-n", "nvue", url));
    network::RoceProfile profile;
    const auto ps = ports({"swp1", "swp2"});
    converge(*d, profile, ps);
    const json applied = emu.get("leaf-n").running();
    CHECK(applied["interface"]["swp2"]["qos"]["pfc-watchdog"]["state"] == "enable");
    CHECK(applied["qos"]["pfc-watchdog"]["robustness"] == 2);
    auto running = d->read_running(ps);
    REQUIRE(running);
    CHECK((*running)["interface"]["swp1"]["qos"]["pfc-watchdog"]["state"] == "enable");

    REQUIRE(emu.get("leaf-n").change_behind_back(
        {{"interface", {{"swp2", {{"qos", {{"pfc-watchdog", {{"state", "disable"}}}}}}}}},
         {"qos", {{"mapping", {{"default-global", {{"trust", "l3"}}}}}}}}));
    auto after = d->read_running(ps);
    REQUIRE(after);
    auto changes = d->diff(*d->render(profile, ps), *after);
    REQUIRE(changes.size() == 2);
    const auto* wd = find_change(changes, "swp2", "state");
    REQUIRE(wd);
    CHECK(wd->path == "interface/swp2/qos/pfc-watchdog/state");
    CHECK(wd->running == "disable");
    CHECK(wd->desired == "enable");
    const auto* trust = find_change(changes, "", "trust");
    REQUIRE(trust);
    CHECK(trust->running == "l3");
    converge(*d, profile, ps);
    CHECK(emu.get("leaf-n").running()["interface"]["swp2"]["qos"]["pfc-watchdog"]["state"] == "enable");
}

// ---- EOS: the platform's queue command, the watchdog per port ----

TEST_CASE("eos: VOQ families by modelName") {
    for (const char* m : {"DCS-7280CR3-32P4-F", "DCS-7280SR-48C6", "DCS-7280CR2-60", "DCS-7504N", "DCS-7508",
                          "DCS-7804", "DCS-7020SR-24C2", "DCS-7020TRA-48", "7280PR3-24"}) {
        INFO(m);
        CHECK(network::eos::eos_model_is_voq(m));
    }
    for (const char* m : {"DCS-7050CX3-32S", "DCS-7060CX2-32S", "DCS-7260CX3-64", "DCS-7368X4", "DCS-7388X5",
                          "DCS-7358X4", "DCS-7300X-64C", "vEOS-lab", "cEOSLab", ""}) {
        INFO(m);
        CHECK_FALSE(network::eos::eos_model_is_voq(m));
    }
    auto p = network::eos::eos_platform({{"modelName", "DCS-7280CR3-32P4-F"}, {"version", "4.31.2F"}});
    REQUIRE(p);
    CHECK(p->voq);
    CHECK(std::string(p->queue_command()) == "uc-tx-queue");
    auto none = network::eos::eos_platform(json::object());
    REQUIRE_FALSE(none);
    CHECK(none.error().code == "network.eos_platform_unknown");
}

TEST_CASE("eos: a VOQ model gets uc-tx-queue, a non-VOQ one tx-queue") {
    network::RoceProfile profile;
    auto desired = network::eos::render_eos(profile, ports({"Ethernet1/1"}));
    REQUIRE(desired);
    auto has = [](const std::vector<std::string>& lines, const std::string& l) {
        return std::find(lines.begin(), lines.end(), l) != lines.end();
    };
    const auto voq = network::eos::eos_config_lines(*desired, json::object(), {"DCS-7280CR3-32P4", true});
    CHECK(has(voq, "uc-tx-queue 3"));
    CHECK_FALSE(has(voq, "tx-queue 3"));
    const auto strata = network::eos::eos_config_lines(*desired, json::object(), {"DCS-7050CX3-32S", false});
    CHECK(has(strata, "tx-queue 3"));
    CHECK_FALSE(has(strata, "uc-tx-queue 3"));

    // End to end: the driver reads show version and the VOQ switch takes it.
    Emulators emu;
    const auto url = emu.start("spine-e", "eos", "", "DCS-7280CR3-32P4");
    auto d = driver_for(fleet_switch("spine-e", "eos", url));
    const auto ps = ports({"Ethernet1/1"});
    converge(*d, profile, ps);
    const json intf = emu.get("spine-e").running()["cmds"]["interface Ethernet1/1"]["cmds"];
    REQUIRE(intf.contains("uc-tx-queue 3"));
    CHECK_FALSE(intf.contains("tx-queue 3"));
    CHECK(intf["uc-tx-queue 3"]["cmds"].contains(
        "random-detect ecn minimum-threshold 150 kbytes maximum-threshold 1500 kbytes max-mark-probability 10"));
    // Read back from uc-tx-queue into the same form: nothing left to do.
    auto running = d->read_running(ps);
    REQUIRE(running);
    CHECK((*running)["interfaces"]["Ethernet1/1"]["queue"]["3"]["ecn"]["probability"] == 10);
}

TEST_CASE("eos: a VOQ switch refuses tx-queue: the whole session fails, nothing is half-applied") {
    Emulators emu;
    const auto url = emu.start("spine-e", "eos", "", "DCS-7280SR-48C6");
    auto d = driver_for(fleet_switch("spine-e", "eos", url));
    auto* eos = dynamic_cast<network::eos::EosDriver*>(d.get());
    REQUIRE(eos);
    const json before = emu.get("spine-e").running();
    network::RoceProfile profile;
    const auto ps = ports({"Ethernet1/1"});
    auto desired = network::eos::render_eos(profile, ps);
    REQUIRE(desired);
    // What a driver blind to the platform sends: tx-queue, in a session.
    std::vector<std::string> cmds{"enable", "configure session kiln-blind"};
    for (auto& l : network::eos::eos_config_lines(*desired, json::object(), {"", false})) cmds.push_back(l);
    cmds.push_back("commit");
    auto r = eos->run_cmds(cmds);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "network.eapi_error");
    CHECK_THAT(r.error().message, Catch::Contains("'tx-queue 3' failed") && Catch::Contains("invalid command"));
    CHECK(emu.get("spine-e").running() == before);  // the lines before tx-queue stayed in the session
    REQUIRE(eos->run_cmds({"enable", "configure session kiln-blind", "abort"}));
    CHECK(emu.get("spine-e").running() == before);

    // The driver itself reads the model and converges the same switch.
    converge(*d, profile, ps);
    CHECK(emu.get("spine-e").running()["cmds"]["interface Ethernet1/1"]["cmds"].contains("uc-tx-queue 3"));
}

TEST_CASE("eos driver: the watchdog is on per port and read back, and turning it off is drift") {
    Emulators emu;
    const auto url = emu.start("leaf-e", "eos");
    auto d = driver_for(fleet_switch("leaf-e", "eos", url));
    network::RoceProfile profile;  // detection 200 ms, restoration 400 ms
    const auto ps = ports({"Ethernet1/1", "Ethernet2/1"});
    auto desired = d->render(profile, ps);
    REQUIRE(desired);
    CHECK((*desired)["pfc-watchdog"]["polling-interval"] == "0.1");
    CHECK((*desired)["interfaces"]["Ethernet2/1"]["pfc-watchdog"] == "on");
    converge(*d, profile, ps);
    const json cmds = emu.get("leaf-e").running()["cmds"];
    CHECK(cmds.contains("priority-flow-control pause watchdog default timeout 0.2"));
    CHECK(cmds.contains("priority-flow-control pause watchdog default recovery-time 0.4"));
    CHECK(cmds.contains("priority-flow-control pause watchdog default polling-interval 0.1"));
    CHECK(cmds["interface Ethernet2/1"]["cmds"].contains("priority-flow-control pause watchdog"));
    auto running = d->read_running(ps);
    REQUIRE(running);
    CHECK((*running)["interfaces"]["Ethernet1/1"]["pfc-watchdog"] == "on");
    CHECK((*running)["pfc-watchdog"]["polling-interval"] == "0.1");

    REQUIRE(emu.get("leaf-e").change_behind_back(
        {{"cmds", {"interface Ethernet2/1", "no priority-flow-control pause watchdog"}}}));
    auto after = d->read_running(ps);
    REQUIRE(after);
    auto changes = d->diff(*desired, *after);
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].port == "Ethernet2/1");
    CHECK(changes[0].field == "pfc-watchdog");
    CHECK(changes[0].running.is_null());
    CHECK(changes[0].desired == "on");
    converge(*d, profile, ps);
    CHECK(emu.get("leaf-e").running()["cmds"]["interface Ethernet2/1"]["cmds"].contains(
        "priority-flow-control pause watchdog"));
}

TEST_CASE("eos render: watchdog times EOS cannot take are refused, the polling interval follows them") {
    network::RoceProfile p;
    p.pfc_watchdog_detection_ms = 30;
    p.pfc_watchdog_restoration_ms = 1000;
    auto ok = network::eos::render_eos(p, ports({"Ethernet1/1"}));
    REQUIRE(ok);
    CHECK((*ok)["pfc-watchdog"]["timeout"] == "0.03");
    CHECK((*ok)["pfc-watchdog"]["polling-interval"] == "0.015");
    for (auto [detection, restoration] : {std::pair{205, 400}, std::pair{5, 400}, std::pair{200, 600000}}) {
        p.pfc_watchdog_detection_ms = detection;
        p.pfc_watchdog_restoration_ms = restoration;
        auto bad = network::eos::render_eos(p, ports({"Ethernet1/1"}));
        INFO(detection << " " << restoration);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().code == "network.bad_profile");
    }
}
