// The network stage against emulated NVUE and EOS switches: observe, plan
// (one action per switch), apply, verify, and drift as plan work; and the
// CLI: `kiln plan --detailed-exitcode` exits 2 after a change behind kiln's
// back, `kiln network drift` names switch, port and field, `kiln apply`
// repairs it; `kiln network render` in each format, with --validate.
#include <catch2/catch.hpp>

#include "network/host/host_runner.h"
#include "network/ssh_runner.h"
#include "network/stage/network_stage.h"
#include "network/switch_drivers.h"
#include "provisioner/engine/cancel.h"
#include "tests/network/fabric_test_util.h"
#include "tests/support/child.h"

using namespace kiln;
using namespace kiln::test::fabric;
using nlohmann::json;

namespace {

struct Lab {
    Emulators emu;
    std::unique_ptr<FleetFile> fleet;

    explicit Lab(int nodes = 2) {
        const auto n = emu.start("leaf-n", "nvue");
        const auto e = emu.start("leaf-e", "eos");
        fleet = write_fleet(fleet_toml({{"leaf-n", "nvue", n, {"swp1", "swp2", "swp3"}},
                                        {"leaf-e", "eos", e, {"Ethernet1/1", "Ethernet2/1", "Ethernet3/1"}}},
                                       nodes));
        INFO(fleet->errors());
        REQUIRE(fleet->loaded.fleet);
    }
    const config::Fleet& f() const { return *fleet->loaded.fleet; }
};

network::NetworkStage make_stage() {
    return network::NetworkStage([](const config::Fleet& fleet, const config::Switch& sw) {
        network::SwitchDriverDeps deps;
        deps.nvue.poll_interval = std::chrono::milliseconds(10);
        return network::make_switch_driver(fleet, sw, deps);
    });
}

test::ChildResult kiln_cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv{KILN_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_child(argv);
}

}  // namespace

TEST_CASE("network stage: holds each switch the node is cabled to") {
    Lab lab;
    auto stage = make_stage();
    CHECK(stage.resources(lab.f(), lab.f().nodes[0]) == std::vector<std::string>{"switch:leaf-e", "switch:leaf-n"});
}

TEST_CASE("network stage: observe, one action per switch, apply, verify: then nothing to do") {
    Lab lab;
    auto stage = make_stage();
    engine::StopToken stop;
    const auto& node = lab.f().nodes[1];
    engine::StageContext ctx(lab.f(), node, "network", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(5), nullptr, nullptr);
    auto obs = stage.observe(ctx);
    REQUIRE(obs);
    // No `host` in this fleet: said so, never skipped silently.
    CHECK(obs->state["host_nics"]["managed"] == false);
    CHECK_THAT(obs->state["host_nics"]["why"].get<std::string>(),
               Catch::Contains("node n2 has no host table (nodes[].host), so kiln does not set its NICs"));
    CHECK(obs->notes.empty());
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan);
    REQUIRE(plan->size() == 2);
    // Switches in fleet order (the loader sorts [switches.*] by name).
    CHECK((*plan)[0].id == "configure:leaf-e");
    CHECK((*plan)[1].id == "configure:leaf-n");
    // n2 is cabled to the second port of each switch: only those appear.
    CHECK_THAT((*plan)[1].description, Catch::Contains("swp2"));
    CHECK_FALSE(Catch::Contains("swp1").match((*plan)[1].description));
    // 21: the dscp map (9: 26 and 48, and 24, 25, 27-31 out of TC 3), the
    // watchdog's timeout, recovery, poll, action (4), and the port's mtu,
    // trust, pfc, no-drop, watchdog and its queue's three ECN values (8).
    CHECK_THAT((*plan)[0].description,
               Catch::StartsWith("configure leaf-e (eos): 21 changes: Ethernet2/1 mtu: (absent) -> 9214"));
    CHECK_FALSE(stage.verify(ctx));
    for (const auto& a : *plan) {
        auto st = stage.apply(ctx, a);
        INFO((st ? "" : st.error().str()));
        REQUIRE(st);
    }
    CHECK(stage.verify(ctx));
    // Applying again is harmless: the switch is re-read and found converged.
    CHECK(stage.apply(ctx, (*plan)[0]));
    auto again = stage.observe(ctx);
    REQUIRE(again);
    CHECK(stage.plan(ctx, *again)->empty());
    CHECK(lab.emu.get("leaf-e").running()["cmds"].contains("interface Ethernet2/1"));
    CHECK(lab.emu.get("leaf-n").running()["interface"]["swp2"]["link"]["mtu"] == 9216);
    CHECK_FALSE(lab.emu.get("leaf-e").running()["cmds"].contains("interface Ethernet1/1"));  // n1's, not applied
}

TEST_CASE("network stage: an unreachable switch is a transient error naming it") {
    Emulators emu;
    const auto url = emu.start("leaf-n", "nvue");
    auto fleet = write_fleet(
        fleet_toml({{"leaf-n", "nvue", url, {"swp1"}}, {"leaf-x", "eos", "http://127.0.0.1:1", {"Ethernet1/1"}}}, 1));
    REQUIRE(fleet->loaded.fleet);
    auto stage = make_stage();
    engine::StopToken stop;
    engine::StageContext ctx(*fleet->loaded.fleet, fleet->loaded.fleet->nodes[0], "network", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(5), nullptr, nullptr);
    auto obs = stage.observe(ctx);
    REQUIRE_FALSE(obs);
    CHECK(obs.error().transient);
    CHECK_THAT(obs.error().message, Catch::Contains("leaf-x"));
}

TEST_CASE("kiln CLI: drift behind kiln's back is plan work (exit 2), named by drift, repaired by apply") {
    Lab lab;
    const std::string& fleet = lab.fleet->path;
    auto first = kiln_cli({"apply", fleet});
    INFO(first.out + first.err);
    REQUIRE(first.exit_code == 0);
    auto converged = kiln_cli({"plan", fleet, "--detailed-exitcode"});
    INFO(converged.out + converged.err);
    CHECK(converged.exit_code == 0);
    auto clean = kiln_cli({"network", "drift", fleet});
    CHECK(clean.exit_code == 0);
    CHECK_THAT(clean.out, Catch::Contains("Drift: 0 differences on 2 switches checked"));

    REQUIRE(lab.emu.get("leaf-n").change_behind_back({{"interface", {{"swp2", {{"link", {{"mtu", 1500}}}}}}}}));
    auto plan = kiln_cli({"plan", fleet, "--detailed-exitcode"});
    INFO(plan.out + plan.err);
    CHECK(plan.exit_code == 2);
    CHECK_THAT(plan.out, Catch::Contains("configure leaf-n (nvue): 1 change: swp2 mtu: 1500 -> 9216"));

    auto drift = kiln_cli({"network", "drift", fleet, "--json"});
    INFO(drift.out + drift.err);
    CHECK(drift.exit_code == 2);
    auto doc = json::parse(drift.out);
    REQUIRE(doc["drift"].size() == 1);
    CHECK(doc["drift"][0]["switch"] == "leaf-n");
    CHECK(doc["drift"][0]["port"] == "swp2");
    CHECK(doc["drift"][0]["field"] == "mtu");
    CHECK(doc["drift"][0]["running"] == 1500);

    auto text = kiln_cli({"network", "drift", fleet});
    CHECK(text.exit_code == 2);
    CHECK_THAT(text.out, Catch::Contains("leaf-n swp2 mtu: running 1500, want 9216"));

    auto repair = kiln_cli({"apply", fleet});
    INFO(repair.out + repair.err);
    CHECK(repair.exit_code == 0);
    CHECK(lab.emu.get("leaf-n").running()["interface"]["swp2"]["link"]["mtu"] == 9216);
    CHECK(kiln_cli({"network", "drift", fleet}).exit_code == 0);
    CHECK(kiln_cli({"plan", fleet, "--detailed-exitcode"}).exit_code == 0);
}

TEST_CASE("kiln CLI: a spine is applied, its drift named by `network drift` and planned, and repaired") {
    Emulators emu;
    const auto n = emu.start("leaf-n", "nvue");
    const auto s = emu.start("spine-e", "eos");
    auto fleet = write_fleet(fleet_toml({{"leaf-n", "nvue", n, {"swp1", "swp2", "swp3"}, false, 1, 2},
                                         {"spine-e", "eos", s, {"Ethernet1/1", "Ethernet2/1"}, true}},
                                        2) +
                             uplink_toml("leaf-n", "swp3", "spine-e", "Ethernet1/1"));
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    auto first = kiln_cli({"apply", fleet->path});
    INFO(first.out + first.err);
    REQUIRE(first.exit_code == 0);
    const json spine = emu.get("spine-e").running()["cmds"];
    CHECK(spine.contains("qos map dscp 26 to traffic-class 3"));
    CHECK(spine["interface Ethernet1/1"]["cmds"].contains("priority-flow-control priority 3 no-drop"));
    CHECK(spine["interface Ethernet1/1"]["cmds"].contains("mtu 9214"));
    CHECK_FALSE(spine.contains("interface Ethernet2/1"));
    auto clean = kiln_cli({"network", "drift", fleet->path});
    CHECK(clean.exit_code == 0);
    CHECK_THAT(clean.out, Catch::Contains("Drift: 0 differences on 2 switches checked"));

    REQUIRE(emu.get("spine-e").change_behind_back({{"cmds", {"interface Ethernet1/1", "mtu 1500"}}}));
    auto drift = kiln_cli({"network", "drift", fleet->path});
    INFO(drift.out + drift.err);
    CHECK(drift.exit_code == 2);
    CHECK_THAT(drift.out, Catch::Contains("spine-e Ethernet1/1 mtu: running 1500, want 9214"));
    auto plan = kiln_cli({"plan", fleet->path, "--detailed-exitcode"});
    INFO(plan.out + plan.err);
    CHECK(plan.exit_code == 2);
    CHECK_THAT(plan.out, Catch::Contains("configure spine-e (eos): 1 change: Ethernet1/1 mtu: 1500 -> 9214"));
    auto repair = kiln_cli({"apply", fleet->path});
    INFO(repair.out + repair.err);
    CHECK(repair.exit_code == 0);
    CHECK(emu.get("spine-e").running()["cmds"]["interface Ethernet1/1"]["cmds"].contains("mtu 9214"));
    CHECK(kiln_cli({"plan", fleet->path, "--detailed-exitcode"}).exit_code == 0);
}

TEST_CASE("kiln CLI: a three-tier fabric is lossless up to the super-spine, and the spines are not held per node") {
    Emulators emu;
    const auto n = emu.start("leaf-n", "nvue");
    const auto s = emu.start("spine-e", "eos");
    const auto x = emu.start("super-e", "eos");
    auto fleet = write_fleet(fleet_toml({{"leaf-n", "nvue", n, {"swp1", "swp2", "swp3"}, false, 1, 2},
                                         {"spine-e", "eos", s, {"Ethernet1/1", "Ethernet2/1", "Ethernet3/1"}, true},
                                         {"super-e", "eos", x, {"Ethernet1/1", "Ethernet2/1"}, true}},
                                        2) +
                             uplink_toml("leaf-n", "swp3", "spine-e", "Ethernet1/1") +
                             uplink_toml("spine-e", "Ethernet3/1", "super-e", "Ethernet2/1"));
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    // The node holds its leaf only: under a spine, nodes of other leaves run beside it.
    auto stage = make_stage();
    CHECK(stage.resources(*fleet->loaded.fleet, fleet->loaded.fleet->nodes[0]) ==
          std::vector<std::string>{"switch:leaf-n"});

    auto plan = kiln_cli({"plan", fleet->path});
    INFO(plan.out + plan.err);
    CHECK_THAT(plan.out, Catch::Contains("configure super-e (eos)") && Catch::Contains("Ethernet2/1"));
    auto first = kiln_cli({"apply", fleet->path});
    INFO(first.out + first.err);
    REQUIRE(first.exit_code == 0);
    // Both ends of the core link carry the lossless class; nothing else on the super-spine.
    const json super = emu.get("super-e").running()["cmds"];
    CHECK(super.contains("qos map dscp 26 to traffic-class 3"));
    CHECK(super["interface Ethernet2/1"]["cmds"].contains("priority-flow-control priority 3 no-drop"));
    CHECK(super["interface Ethernet2/1"]["cmds"].contains("mtu 9214"));
    CHECK_FALSE(super.contains("interface Ethernet1/1"));
    const json spine = emu.get("spine-e").running()["cmds"];
    CHECK(spine["interface Ethernet3/1"]["cmds"].contains("priority-flow-control priority 3 no-drop"));
    CHECK(spine["interface Ethernet1/1"]["cmds"].contains("priority-flow-control priority 3 no-drop"));
    CHECK_FALSE(spine.contains("interface Ethernet2/1"));
    auto clean = kiln_cli({"network", "drift", fleet->path});
    CHECK(clean.exit_code == 0);
    CHECK_THAT(clean.out, Catch::Contains("Drift: 0 differences on 3 switches checked"));
    CHECK(kiln_cli({"plan", fleet->path, "--detailed-exitcode"}).exit_code == 0);

    // Drift on the core link is every node's plan work, and apply repairs it.
    REQUIRE(emu.get("super-e").change_behind_back({{"cmds", {"interface Ethernet2/1", "mtu 1500"}}}));
    auto again = kiln_cli({"plan", fleet->path, "--detailed-exitcode"});
    INFO(again.out + again.err);
    CHECK(again.exit_code == 2);
    CHECK_THAT(again.out, Catch::Contains("configure super-e (eos): 1 change: Ethernet2/1 mtu: 1500 -> 9214"));
    auto repair = kiln_cli({"apply", fleet->path});
    INFO(repair.out + repair.err);
    CHECK(repair.exit_code == 0);
    CHECK(emu.get("super-e").running()["cmds"]["interface Ethernet2/1"]["cmds"].contains("mtu 9214"));
    CHECK(kiln_cli({"plan", fleet->path, "--detailed-exitcode"}).exit_code == 0);
}

TEST_CASE("kiln CLI: network render gives a SONiC spine its leaves' lossless profile on the uplink ports") {
    auto fleet = write_fleet(fleet_toml({{"leaf-s", "sonic", "127.0.0.1:2222", {"Ethernet0", "Ethernet4"}, false, 1, 1},
                                         {"spine-s", "sonic", "127.0.0.1:2223", {"Ethernet0", "Ethernet8"}, true}},
                                        1, "roce_dscp = 24\n") +
                             "[network.other]\n" + uplink_toml("leaf-s", "Ethernet4", "spine-s", "Ethernet8"));
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    auto out = kiln_cli({"network", "render", fleet->path, "--switch", "spine-s", "--validate"});
    INFO(out.out + out.err);
    REQUIRE(out.exit_code == 0);
    const json db = json::parse(out.out);
    // Two profiles in the fleet: the spine takes leaf-s's (DSCP 24), not a default.
    CHECK(db["DSCP_TO_TC_MAP"]["ROCE"]["24"] == "3");
    CHECK(db["PORT_QOS_MAP"]["Ethernet8"]["pfc_enable"] == "3");
    CHECK(db["PORT_QOS_MAP"]["Ethernet8"]["dscp_to_tc_map"] == "ROCE");
    CHECK(db["PORT"]["Ethernet8"]["description"] == "leaf-s Ethernet4");
    auto leaf = json::parse(kiln_cli({"network", "render", fleet->path, "--switch", "leaf-s"}).out);
    CHECK(leaf["PORT"]["Ethernet4"]["description"] == "spine-s Ethernet8");
    CHECK(leaf["PORT_QOS_MAP"]["Ethernet4"]["pfc_enable"] == "3");
}

TEST_CASE("kiln CLI: network render prints each format: --validate runs the SONiC YANG check") {
    auto fleet = write_fleet(fleet_toml({{"leaf-s", "sonic", "127.0.0.1:2222", {"Ethernet0", "Ethernet4"}},
                                         {"leaf-n", "nvue", "127.0.0.1:8765", {"swp1", "swp2"}}},
                                        2));
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    auto sonic = kiln_cli({"network", "render", fleet->path, "--validate"});
    INFO(sonic.out + sonic.err);
    REQUIRE(sonic.exit_code == 0);
    auto all = json::parse(sonic.out);
    REQUIRE(all.contains("leaf-s"));
    CHECK_FALSE(all.contains("leaf-n"));  // not a SONiC switch
    CHECK(all["leaf-s"]["PORT"]["Ethernet4"]["mtu"] == "9216");
    CHECK(all["leaf-s"]["DSCP_TO_TC_MAP"]["ROCE"]["26"] == "3");

    auto one = kiln_cli({"network", "render", fleet->path, "--switch", "leaf-s"});
    REQUIRE(one.exit_code == 0);
    CHECK(json::parse(one.out).contains("PORT_QOS_MAP"));

    auto nvue = kiln_cli({"network", "render", fleet->path, "--switch", "leaf-n"});
    REQUIRE(nvue.exit_code == 0);
    CHECK(json::parse(nvue.out)["interface"]["swp2"]["link"]["mtu"] == 9216);

    auto eos = kiln_cli({"network", "render", fleet->path, "--format", "eos"});
    REQUIRE(eos.exit_code == 0);
    CHECK(json::parse(eos.out).empty());  // no EOS switch in this fleet

    auto bad = kiln_cli({"network", "render", fleet->path, "--switch", "leaf-z"});
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("no switch 'leaf-z'"));
}

TEST_CASE("kiln CLI: network render --validate names table, key and field of a config the models refuse") {
    // A watchdog detection time past SONiC's YANG bound: the loader allows
    // it (other switch OSes take it), the SONiC models do not.
    auto fleet = write_fleet(fleet_toml({{"leaf-s", "sonic", "127.0.0.1:2222", {"Ethernet0"}}}, 1,
                                        "pfc_watchdog = { detection_ms = 60000 }\n"));
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    auto r = kiln_cli({"network", "render", fleet->path, "--validate"});
    INFO(r.out + r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("switch leaf-s: table PFC_WD, key Ethernet0, field detection_time"));
}

// ---- host NICs through a scripted host: ConnectX firmware needing a reboot ----

namespace {

// Answers like a converged mlx5 host whose firmware still has ATS off.
class ConnectXHost : public CommandRunner {
public:
    Result<CommandResult> run(const CommandSpec& spec) override {
        calls.push_back(spec.argv);
        const auto& a = spec.argv;
        const std::string last = a.back();
        auto out = [](std::string text) {
            CommandResult r;
            r.exit_code = 0;
            r.out = std::move(text);
            return r;
        };
        if (a[0] == "ip") return out(R"([{"ifname":"ens1f0np0","mtu":9000,"max_mtu":9978}])");
        if (a[0] == "cat" && last.ends_with("sriov_totalvfs")) return out("8\n");
        if (a[0] == "cat" && last.ends_with("sriov_numvfs")) return out("8\n");
        if (a[0] == "cat" && last.find("/ecn/") != std::string::npos) return out("1\n");
        if (a[0] == "dcb" && a[2] == "app") return out(R"({"dscp_prio":[[26,3],[48,6]]})");
        if (a[0] == "dcb" && a[2] == "pfc")
            return out(
                R"({"prio_pfc":{"0":false,"1":false,"2":false,"3":true,"4":false,"5":false,"6":false,"7":false}})");
        if (a[0] == "readlink") return out("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0\n");
        if (a[0] == "mlxconfig")
            return out(
                "Configurations:   Next Boot\n   NUM_OF_VFS   8\n   SRIOV_EN   True(1)\n   ATS_ENABLED   False(0)\n"
                "   ROCE_CC_PRIO_MASK_P1   8\n   CNP_DSCP_P1   48\n   CNP_802P_PRIO_P1   6\n");
        return make_error("exec", "exec.not_found", a[0] + ": not found");
    }
    std::vector<std::vector<std::string>> calls;
};

std::unique_ptr<FleetFile> connectx_fleet(const std::string& require) {
    return write_fleet(
        "schema = 1\n[fleet]\nname = \"cx\"\npipelines = \"pipelines\"\n[[racks]]\nname = \"r1\"\n[network.roce]\n"
        "[[nodes]]\nname = \"gpu-01\"\nrack = \"r1\"\nrole = \"net\"\nnetwork = \"roce\"\n"
        "host = { local = true" +
        require +
        " }\n"
        "nics = [{ name = \"mlx5_0\", ifname = \"ens1f0np0\", vfs = 8, firmware = true }]\n");
}

}  // namespace

TEST_CASE("network stage host NICs: firmware on a local host is a warning with its mlxconfig plan, never an action") {
    auto fleet = connectx_fleet("");
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    auto host = std::make_shared<ConnectXHost>();
    network::NetworkStage stage({}, [host](const config::Node&) { return std::shared_ptr<CommandRunner>(host); });
    engine::StopToken stop;
    engine::StageContext ctx(*fleet->loaded.fleet, fleet->loaded.fleet->nodes[0], "network", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(1), nullptr, nullptr);
    auto obs = stage.observe(ctx);
    INFO((obs ? obs->state.dump(2) : obs.error().str()));
    REQUIRE(obs);
    CHECK(obs->state["host_nics"]["counts"]["needs-reboot"] == 1);
    CHECK(obs->state["host_nics"]["counts"]["ok"].get<int>() >= 6);  // mtu, VFs, DCB, ECN, SRIOV_EN, NUM_OF_VFS
    REQUIRE(obs->notes.size() == 1);
    CHECK(obs->notes[0] ==
          "host NIC firmware mlx5_0 ATS_ENABLED False->True: kiln reboots hosts only over SSH (host is local), so do "
          "it by hand: mlxconfig -d 0000:3b:00.0 -y set ATS_ENABLED=1, then one host reboot");
    // kiln does not reboot the machine it runs on: no action, so a re-run does not plan again, and verify holds.
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan);
    CHECK(plan->empty());
    CHECK(stage.verify(ctx));
    for (const auto& c : host->calls) {
        CHECK(c[0] != "tee");  // nothing written
        if (c[0] == "mlxconfig") CHECK(c[4] == "query");
    }

    // Listed in the host's `require`, it stops the plan instead.
    auto strict = connectx_fleet(", require = [\"firmware\"]");
    REQUIRE(strict->loaded.fleet);
    engine::StageContext sctx(*strict->loaded.fleet, strict->loaded.fleet->nodes[0], "network", stop,
                              engine::StageContext::Clock::now() + std::chrono::minutes(1), nullptr, nullptr);
    auto sobs = stage.observe(sctx);
    REQUIRE(sobs);
    auto splan = stage.plan(sctx, *sobs);
    REQUIRE_FALSE(splan);
    CHECK(splan.error().code == "network.host_nic_required");
    CHECK_THAT(splan.error().message,
               Catch::StartsWith("node gpu-01: mlx5_0 (ens1f0np0) firmware ATS_ENABLED is required (host.require) "
                                 "but needs-reboot: mlxconfig -d 0000:3b:00.0"));
    CHECK_FALSE(stage.verify(sctx));
}

TEST_CASE("host runner: SSH hosts use the switches' SSH settings, netns hosts run through ip netns exec") {
    auto fleet = write_fleet(
        "schema = 1\n[fleet]\nname = \"hr\"\npipelines = \"pipelines\"\n[[racks]]\nname = \"r1\"\n"
        "[defaults]\nrole = \"net\"\nhost = { username = \"root\", ssh_key = \"id\", known_hosts = \"kh\" }\n"
        "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nhost = { address = \"10.0.0.21:2222\" }\n"
        "[[nodes]]\nname = \"b\"\nrack = \"r1\"\nhost = { netns = \"rehearse-b\" }\n"
        "[[nodes]]\nname = \"c\"\nrack = \"r1\"\n");
    INFO(fleet->errors());
    REQUIRE(fleet->loaded.fleet);
    const auto& nodes = fleet->loaded.fleet->nodes;

    auto ssh = network::host::make_host_runner(nodes[0]);
    REQUIRE(ssh);
    auto* runner = dynamic_cast<network::SshRunner*>(ssh->get());
    REQUIRE(runner);
    auto argv = runner->ssh_argv({"ip", "-V"});
    REQUIRE(argv);
    const std::string line = describe_argv(*argv);
    CHECK_THAT(line,
               Catch::Contains("-o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + fleet->dir.path() + "/kh"));
    CHECK_THAT(line, Catch::Contains("-i " + fleet->dir.path() + "/id -p 2222 -l root -- 10.0.0.21 'ip -V'"));

    struct Recorder : CommandRunner {
        std::vector<std::string> argv;
        Result<CommandResult> run(const CommandSpec& spec) override {
            argv = spec.argv;
            CommandResult r;
            r.exit_code = 0;
            return r;
        }
    };
    auto rec = std::make_shared<Recorder>();
    auto ns = network::host::make_host_runner(nodes[1], rec);
    REQUIRE(ns);
    CommandSpec spec;
    spec.argv = {"dcb", "-j", "pfc", "show", "dev", "rdma0", "prio-pfc"};
    REQUIRE((*ns)->run(spec));
    CHECK(rec->argv == std::vector<std::string>{"ip", "netns", "exec", "rehearse-b", "dcb", "-j", "pfc", "show", "dev",
                                                "rdma0", "prio-pfc"});

    auto none = network::host::make_host_runner(nodes[2]);
    REQUIRE_FALSE(none);
    CHECK(none.error().code == "network.host_not_managed");
}
