// ConnectX firmware applied: mlxconfig set on every NIC that differs, one
// host reboot per node, every NIC read back after it. Against a scripted
// host (tests/network/connectx_fake_host.h) that records calls, keeps
// next-boot and current values, and applies them when it reboots. Waits are
// bounded by tiny timeouts, never by sleeping and hoping.
#include <chrono>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "network/host/host_reboot.h"
#include "network/host/nic_firmware.h"
#include "network/stage/network_config.h"
#include "network/stage/network_stage.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/cancel.h"
#include "tests/network/connectx_fake_host.h"
#include "tests/support/temp_dir.h"

using namespace kiln;
using namespace kiln::network::host;
using kiln::test::ConnectXFakeHost;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

const std::string kPci0 = "0000:3b:00.0";
const std::string kPci1 = "0000:af:00.0";

// Two NICs, both with SR-IOV off, no VFs and ATS off in firmware.
std::shared_ptr<ConnectXFakeHost> two_nic_host() {
    auto h = std::make_shared<ConnectXFakeHost>();
    h->add_nic(kPci0, "ens1f0np0", "0", "0", "0");
    h->add_nic(kPci1, "ens2f0np0", "0", "0", "0");
    return h;
}

std::vector<FirmwareNic> two_nics() {
    return {{"mlx5_0", "ens1f0np0", FirmwareWanted{true, 8, true}},
            {"mlx5_1", "ens2f0np0", FirmwareWanted{true, 8, true}}};
}

FirmwareApplyOptions fast_options(std::vector<std::string>* progress = nullptr) {
    FirmwareApplyOptions o;
    o.command_timeout = milliseconds(500);
    o.reboot.timeout = milliseconds(2000);
    o.reboot.poll_interval = milliseconds(1);
    o.reboot.command_timeout = milliseconds(500);
    if (progress) o.reboot.progress = [progress](const std::string& m) { progress->push_back(m); };
    return o;
}

}  // namespace

TEST_CASE("host NIC firmware: mlxconfig query output is read with and without the Current column") {
    const std::vector<std::string> keys = {"SRIOV_EN", "NUM_OF_VFS", "ATS_ENABLED"};
    auto verbose = parse_mlxconfig_query(
        "Device #1:\n----------\n\nConfigurations:                 Default         Current         Next Boot\n"
        "*        SRIOV_EN             False(0)        False(0)        True(1)\n"
        "         NUM_OF_VFS           0               8               8\n"
        "         ATS_ENABLED_X        False(0)        False(0)        False(0)\n",
        keys);
    REQUIRE(verbose.count("SRIOV_EN"));
    CHECK(verbose["SRIOV_EN"].current == "0");
    CHECK(verbose["SRIOV_EN"].next_boot == "1");
    CHECK(verbose["SRIOV_EN"].running() == "0");
    CHECK(verbose["NUM_OF_VFS"].current == "8");
    CHECK_FALSE(verbose.count("ATS_ENABLED"));  // a longer key is not the key

    auto plain =
        parse_mlxconfig_query("Configurations:                 Next Boot\n         ATS_ENABLED        True(1)\n", keys);
    REQUIRE(plain.count("ATS_ENABLED"));
    CHECK(plain["ATS_ENABLED"].current.empty());
    CHECK(plain["ATS_ENABLED"].running() == "1");
}

TEST_CASE("host NIC firmware apply: one mlxconfig set per differing NIC, one reboot for the node, then verified") {
    auto host = two_nic_host();
    host->nics[kPci1].next["ATS_ENABLED"] = "1";  // already set for the next boot: not set again
    host->nics[kPci1].next["SRIOV_EN"] = "1";
    host->nics[kPci1].next["NUM_OF_VFS"] = "8";
    host->down_polls = 3;  // the host is away for three polls
    std::vector<std::string> progress;

    auto done = apply_nic_firmware(*host, two_nics(), fast_options(&progress));
    INFO((done ? "" : done.error().str()));
    REQUIRE(done);
    CHECK(done->rebooted);
    CHECK(host->reboots == 1);
    REQUIRE(host->sets.size() == 1);
    CHECK(host->sets[0] == std::vector<std::string>{"mlxconfig", "-d", kPci0, "-y", "set", "SRIOV_EN=1", "NUM_OF_VFS=8",
                                                    "ATS_ENABLED=1"});
    REQUIRE(done->set.size() == 1);
    CHECK(done->set[0] == "mlx5_0 SRIOV_EN False->True, NUM_OF_VFS 0->8, ATS_ENABLED False->True");
    for (const auto& [pci, n] : host->nics) CHECK(n.current == n.next);
    // The set came before the reboot, the verifying queries after it.
    size_t set_at = 0, reboot_at = 0, last_query = 0;
    for (size_t i = 0; i < host->calls.size(); ++i) {
        const auto& c = host->calls[i];
        if (c[0] == "mlxconfig" && c.size() > 5 && c[5] == "set") set_at = i;
        if (c[0] == "systemctl") reboot_at = i;
        if (c[0] == "mlxconfig" && c.back() == "query" && c[1] == "-e") last_query = i;
    }
    CHECK(set_at < reboot_at);
    CHECK(reboot_at < last_query);
    CHECK(std::count_if(progress.begin(), progress.end(), [](const std::string& m) {
              return m.rfind("waiting for the host to come back", 0) == 0;
          }) >= 3);

    // Both NICs need the set: two sets, still one reboot.
    auto fresh = two_nic_host();
    REQUIRE(apply_nic_firmware(*fresh, two_nics(), fast_options()));
    CHECK(fresh->sets.size() == 2);
    CHECK(fresh->reboots == 1);

    // Converged: nothing set, no reboot.
    const size_t calls = fresh->calls.size();
    auto again = apply_nic_firmware(*fresh, two_nics(), fast_options());
    REQUIRE(again);
    CHECK_FALSE(again->rebooted);
    CHECK(again->set.empty());
    CHECK(fresh->sets.size() == 2);
    CHECK(fresh->reboots == 1);
    for (size_t i = calls; i < fresh->calls.size(); ++i) CHECK(fresh->calls[i][0] != "systemctl");
}

TEST_CASE(
    "host NIC firmware apply: a value that does not hold after the reboot fails, naming NIC, key, wanted and read") {
    auto host = two_nic_host();
    host->nics[kPci1].not_sticking = {"ATS_ENABLED"};
    auto done = apply_nic_firmware(*host, two_nics(), fast_options());
    REQUIRE_FALSE(done);
    CHECK(done.error().code == "network.firmware_not_applied");
    CHECK(done.error().message ==
          "after the host's reboot: mlx5_1 (ens2f0np0, 0000:af:00.0) ATS_ENABLED wanted 1, read 0");
    CHECK(host->reboots == 1);
}

TEST_CASE("host NIC firmware apply: a host that never comes back is a bounded reboot-timeout") {
    auto host = two_nic_host();
    host->never_back = true;
    auto o = fast_options();
    o.reboot.timeout = milliseconds(100);
    o.reboot.poll_interval = milliseconds(5);
    const auto start = std::chrono::steady_clock::now();
    auto done = apply_nic_firmware(*host, two_nics(), o);
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE_FALSE(done);
    CHECK(done.error().code == "network.reboot_timeout");
    CHECK(done.error().transient);
    CHECK_THAT(done.error().message,
               Catch::StartsWith("the host did not come back within 100ms of `systemctl reboot`"));
    CHECK_THAT(done.error().message, Catch::Contains("Connection refused"));
    CHECK(took < std::chrono::seconds(2));
    CHECK(host->reboots == 1);
}

TEST_CASE("host NIC firmware apply: a stop while waiting ends the wait") {
    auto host = two_nic_host();
    host->never_back = true;
    auto o = fast_options();
    o.reboot.timeout = std::chrono::minutes(15);
    int waits = 0;
    o.reboot.wait = [&waits](milliseconds) { return ++waits < 3; };
    auto done = apply_nic_firmware(*host, two_nics(), o);
    REQUIRE_FALSE(done);
    CHECK(done.error().code == "network.stopped");
    CHECK(waits == 3);
}

TEST_CASE("host NIC firmware apply: a refused reboot, a missing mlxconfig and a non-PCI NIC are named errors") {
    auto host = two_nic_host();
    host->reboot_refused = true;
    auto done = apply_nic_firmware(*host, two_nics(), fast_options());
    REQUIRE_FALSE(done);
    CHECK(done.error().code == "network.reboot_refused");
    CHECK_THAT(done.error().message, Catch::Contains("Access denied"));

    auto bare = two_nic_host();
    bare->has_mlxconfig = false;
    done = apply_nic_firmware(*bare, two_nics(), fast_options());
    REQUIRE_FALSE(done);
    CHECK(done.error().code == "network.mlxconfig_missing");
    CHECK_THAT(done.error().message, Catch::StartsWith("mlx5_0 (ens1f0np0, 0000:3b:00.0): mlxconfig is not installed"));
    CHECK_THAT(done.error().message, Catch::Contains("install mstflint"));
    CHECK(bare->reboots == 0);

    auto veth = two_nic_host();
    done = apply_nic_firmware(*veth, {{"mlx5_9", "veth0", FirmwareWanted{}}}, fast_options());
    REQUIRE_FALSE(done);
    CHECK(done.error().code == "network.not_pci");
}

TEST_CASE("host NIC firmware apply: RoCE keys on the port of the PF, and a firmware without them left alone") {
    CHECK(firmware_port("0000:3b:00.0") == 1);
    CHECK(firmware_port("0000:3b:00.1") == 2);
    CHECK(firmware_port("") == 1);

    auto host = std::make_shared<ConnectXFakeHost>();
    host->add_nic("0000:3b:00.1", "ens1f1np1", "1", "8", "1");
    host->add_nic(kPci1, "ens2f0np0", "1", "8", "1");
    for (const char* k : {"ROCE_CC_PRIO_MASK_P1", "CNP_DSCP_P1", "CNP_802P_PRIO_P1"}) {  // an older firmware
        host->nics[kPci1].current.erase(k);
        host->nics[kPci1].next.erase(k);
    }
    FirmwareWanted roce{true, 8, true};
    roce.roce_cc_prio_mask = 1 << 3;
    roce.cnp_dscp = 48;
    roce.cnp_802p_prio = 6;
    auto done =
        apply_nic_firmware(*host, {{"mlx5_1", "ens1f1np1", roce}, {"mlx5_2", "ens2f0np0", roce}}, fast_options());
    INFO((done ? "" : done.error().str()));
    REQUIRE(done);
    REQUIRE(host->sets.size() == 1);
    CHECK(host->sets[0] ==
          std::vector<std::string>{"mlxconfig", "-d", "0000:3b:00.1", "-y", "set", "ROCE_CC_PRIO_MASK_P2=8"});
    CHECK(host->reboots == 1);
    CHECK(host->nics["0000:3b:00.1"].current["ROCE_CC_PRIO_MASK_P2"] == "8");
    CHECK(host->nics["0000:3b:00.1"].current["ROCE_CC_PRIO_MASK_P1"] == "255");  // the other port's, untouched

    // The applier's observation: the missing keys are unsupported items, not errors.
    HostNicApplier applier(std::shared_ptr<CommandRunner>(host, host.get()));
    NicDesired want;
    want.ifname = "ens2f0np0";
    want.firmware = roce;
    auto report = applier.observe(want);
    REQUIRE(report);
    REQUIRE(report->find("firmware CNP_DSCP_P1"));
    CHECK(report->find("firmware CNP_DSCP_P1")->outcome == NicOutcome::Unsupported);
    CHECK(report->find("firmware ATS_ENABLED")->outcome == NicOutcome::Ok);
}

TEST_CASE("host NIC firmware: the RoCE keys follow the netdev's port in sysfs, not its PCI function") {
    CHECK(firmware_settings(FirmwareWanted{true, 8, true}, 2).size() == 3);  // no RoCE keys asked, none given
    auto host = std::make_shared<ConnectXFakeHost>();
    // A Socket Direct card: function .1 is a second PCIe link to port 1.
    host->add_nic("0000:3b:00.1", "ens1f1np0", "1", "8", "1");
    host->nics["0000:3b:00.1"].phys_port_name = "p0";
    // Function .0 driving port 2, told by phys_port_name.
    host->add_nic(kPci1, "ens2f0np1", "1", "8", "1");
    host->nics[kPci1].phys_port_name = "p1";
    // No phys_port_name: dev_port 1 is the second port of its function.
    host->add_nic("0000:5e:00.0", "ens3", "1", "8", "1");
    host->nics["0000:5e:00.0"].dev_port = "1";
    FirmwareWanted roce{true, 8, true};
    roce.roce_cc_prio_mask = 1 << 3;
    auto done = apply_nic_firmware(
        *host, {{"mlx5_1", "ens1f1np0", roce}, {"mlx5_2", "ens2f0np1", roce}, {"mlx5_3", "ens3", roce}},
        fast_options());
    INFO((done ? "" : done.error().str()));
    REQUIRE(done);
    REQUIRE(host->sets.size() == 3);
    CHECK(host->sets[0] ==
          std::vector<std::string>{"mlxconfig", "-d", "0000:3b:00.1", "-y", "set", "ROCE_CC_PRIO_MASK_P1=8"});
    CHECK(host->sets[1] == std::vector<std::string>{"mlxconfig", "-d", kPci1, "-y", "set", "ROCE_CC_PRIO_MASK_P2=8"});
    CHECK(host->sets[2] ==
          std::vector<std::string>{"mlxconfig", "-d", "0000:5e:00.0", "-y", "set", "ROCE_CC_PRIO_MASK_P2=8"});
    CHECK(host->nics["0000:3b:00.1"].current["ROCE_CC_PRIO_MASK_P2"] == "255");  // the other port's, untouched

    // The applier's observation reads the same port.
    HostNicApplier applier(std::shared_ptr<CommandRunner>(host, host.get()));
    NicDesired want;
    want.ifname = "ens1f1np0";
    want.firmware = roce;
    auto report = applier.observe(want);
    REQUIRE(report);
    CHECK(report->find("firmware ROCE_CC_PRIO_MASK_P1"));
    CHECK_FALSE(report->find("firmware ROCE_CC_PRIO_MASK_P2"));
}

TEST_CASE("host NIC firmware: MAX_ACC_OUT_READ is set where the device lists it, left alone where not") {
    auto host = std::make_shared<ConnectXFakeHost>();
    host->add_nic(kPci0, "ens1f0np0", "1", "8", "1");  // a ConnectX-7: lists the key
    host->nics[kPci0].current["MAX_ACC_OUT_READ"] = "0";
    host->nics[kPci0].next["MAX_ACC_OUT_READ"] = "0";
    host->add_nic(kPci1, "ens2f0np0", "1", "8", "1");  // a firmware without it
    FirmwareWanted want{true, 8, true};
    want.max_acc_out_read = 44;
    auto done =
        apply_nic_firmware(*host, {{"mlx5_0", "ens1f0np0", want}, {"mlx5_1", "ens2f0np0", want}}, fast_options());
    INFO((done ? "" : done.error().str()));
    REQUIRE(done);
    REQUIRE(host->sets.size() == 1);
    CHECK(host->sets[0] == std::vector<std::string>{"mlxconfig", "-d", kPci0, "-y", "set", "MAX_ACC_OUT_READ=44"});
    CHECK(host->reboots == 1);
    CHECK(host->nics[kPci0].current["MAX_ACC_OUT_READ"] == "44");
    CHECK(host->nics[kPci1].current.count("MAX_ACC_OUT_READ") == 0);
    // Queries name no keys: one the device lacks cannot fail them.
    for (const auto& c : host->calls)
        if (c[0] == "mlxconfig" && c.size() > 4 && c[4] == "query") CHECK(c.size() == 5);

    // Converged: nothing set, no reboot.
    host->sets.clear();
    auto again =
        apply_nic_firmware(*host, {{"mlx5_0", "ens1f0np0", want}, {"mlx5_1", "ens2f0np0", want}}, fast_options());
    REQUIRE(again);
    CHECK(host->sets.empty());
    CHECK(host->reboots == 1);

    HostNicApplier applier(std::shared_ptr<CommandRunner>(host, host.get()));
    NicDesired nd;
    nd.ifname = "ens2f0np0";
    nd.firmware = want;
    auto report = applier.observe(nd);
    REQUIRE(report);
    REQUIRE(report->find("firmware MAX_ACC_OUT_READ"));
    CHECK(report->find("firmware MAX_ACC_OUT_READ")->outcome == NicOutcome::Unsupported);
}

// ---- the network stage: plan, apply, verify on a node reached over SSH ----

namespace {

struct SshFleet {
    test::TempDir dir;
    config::LoadResult loaded;
    explicit SshFleet(const std::string& host_extra = "") {
        dir.write("pipelines/net.toml", "schema = 1\nname = \"net\"\nstages = [\"network\"]\n");
        const std::string path = dir.write(
            "fleet.toml",
            "schema = 1\n[fleet]\nname = \"cx\"\npipelines = \"pipelines\"\n[[racks]]\nname = \"r1\"\n"
            "[network.roce]\n[[nodes]]\nname = \"gpu-01\"\nrack = \"r1\"\nrole = \"net\"\nnetwork = \"roce\"\n"
            "host = { address = \"10.0.0.21\", known_hosts = \"kh\"" +
                host_extra +
                " }\n"
                "nics = [{ name = \"mlx5_0\", ifname = \"ens1f0np0\", vfs = 8, firmware = true },\n"
                "        { name = \"mlx5_1\", ifname = \"ens2f0np0\", vfs = 8, firmware = true }]\n");
        config::LoadOptions o;
        o.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
        o.tables = {network::network_table()};
        loaded = config::load_fleet(path, o);
        std::string errors;
        for (const auto& d : loaded.errors) errors += d.str() + "\n";
        INFO(errors);
        REQUIRE(loaded.fleet);
    }
    const config::Fleet& f() const { return *loaded.fleet; }
};

}  // namespace

TEST_CASE("network stage: ConnectX firmware is one action, applied with one reboot, verified, then converged") {
    SshFleet fleet(", reboot_timeout = \"2s\"");
    auto host = two_nic_host();
    host->nics[kPci1].current["SRIOV_EN"] = host->nics[kPci1].next["SRIOV_EN"] = "1";
    host->nics[kPci1].current["NUM_OF_VFS"] = host->nics[kPci1].next["NUM_OF_VFS"] = "8";
    network::NetworkStage stage({}, [host](const config::Node&) { return std::shared_ptr<CommandRunner>(host); });
    engine::StopToken stop;
    std::vector<std::string> progress;
    engine::StageContext ctx(
        fleet.f(), fleet.f().nodes[0], "network", stop, engine::StageContext::Clock::now() + std::chrono::minutes(1),
        [&progress](const std::string& m, int) { progress.push_back(m); }, nullptr);

    auto obs = stage.observe(ctx);
    INFO((obs ? obs->state.dump(2) : obs.error().str()));
    REQUIRE(obs);
    CHECK(obs->state["host_nics"]["counts"]["needs-reboot"] == 6);
    CHECK(obs->notes.empty());  // not a warning: kiln applies it
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan);
    REQUIRE(plan->size() == 2);
    CHECK((*plan)[0].id == "host-firmware:gpu-01");
    CHECK((*plan)[0].description ==
          "set ConnectX firmware on gpu-01: mlx5_0 SRIOV_EN False->True, NUM_OF_VFS 0->8, ATS_ENABLED False->True, "
          "ROCE_CC_PRIO_MASK_P1 255->8; mlx5_1 ATS_ENABLED False->True, ROCE_CC_PRIO_MASK_P1 255->8; then reboot the "
          "host once");
    CHECK((*plan)[1].id == "host-nics:gpu-01");  // after the reboot, the runtime settings again
    CHECK_FALSE(stage.verify(ctx));
    CHECK(host->sets.empty());  // observe and plan change nothing
    CHECK(host->reboots == 0);

    for (const auto& a : *plan) {
        auto st = stage.apply(ctx, a);
        INFO((st ? "" : st.error().str()));
        REQUIRE(st);
    }
    CHECK(host->reboots == 1);
    REQUIRE(host->sets.size() == 2);
    CHECK(host->sets[1] ==
          std::vector<std::string>{"mlxconfig", "-d", kPci1, "-y", "set", "ATS_ENABLED=1", "ROCE_CC_PRIO_MASK_P1=8"});
    CHECK(std::find(progress.begin(), progress.end(),
                    "set mlx5_1 ATS_ENABLED False->True, ROCE_CC_PRIO_MASK_P1 255->8") != progress.end());
    auto verified = stage.verify(ctx);
    INFO((verified ? "" : verified.error().str()));
    CHECK(verified);

    auto again = stage.observe(ctx);
    REQUIRE(again);
    auto replan = stage.plan(ctx, *again);
    REQUIRE(replan);
    CHECK(replan->empty());
    // A re-run of the action on a converged host does nothing.
    REQUIRE(stage.apply(ctx, (*plan)[0]));
    CHECK(host->reboots == 1);
    CHECK(host->sets.size() == 2);
}

TEST_CASE("network stage: a host that does not come back fails the firmware action, naming the node") {
    SshFleet fleet(", reboot_timeout = \"100ms\"");
    auto host = two_nic_host();
    host->never_back = true;
    network::NetworkStage stage({}, [host](const config::Node&) { return std::shared_ptr<CommandRunner>(host); });
    engine::StopToken stop;
    engine::StageContext ctx(fleet.f(), fleet.f().nodes[0], "network", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(1), nullptr, nullptr);
    auto obs = stage.observe(ctx);
    REQUIRE(obs);
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan);
    REQUIRE_FALSE(plan->empty());
    const auto start = std::chrono::steady_clock::now();
    auto st = stage.apply(ctx, (*plan)[0]);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == "network.reboot_timeout");
    CHECK_THAT(st.error().message, Catch::StartsWith("node gpu-01 ConnectX firmware: the host did not come back"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
    CHECK(host->reboots == 1);
}

TEST_CASE("network stage: a host without mlxconfig that requires firmware fails the plan, saying to install mstflint") {
    SshFleet fleet(", require = [\"firmware\"]");
    auto host = two_nic_host();
    host->has_mlxconfig = false;
    network::NetworkStage stage({}, [host](const config::Node&) { return std::shared_ptr<CommandRunner>(host); });
    engine::StopToken stop;
    engine::StageContext ctx(fleet.f(), fleet.f().nodes[0], "network", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(1), nullptr, nullptr);
    auto obs = stage.observe(ctx);
    REQUIRE(obs);
    auto plan = stage.plan(ctx, *obs);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code == "network.host_nic_required");
    CHECK_THAT(plan.error().message,
               Catch::StartsWith("node gpu-01: mlx5_0 (ens1f0np0) firmware SRIOV_EN is required (host.require) but "
                                 "unsupported: mlxconfig is not installed on the host (install mstflint"));
    CHECK(host->reboots == 0);
}
