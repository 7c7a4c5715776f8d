// The host NIC applier against real interfaces: a veth pair in a network
// namespace each test creates (root needed, as in CI). veth has an MTU but
// no DCB, no SR-IOV, no RoCE ECN and no PCI device: those must come back as
// "unsupported", not be skipped.
#include <unistd.h>

#include <functional>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "network/host/host_nic.h"
#include "network/ssh_runner.h"
#include "tests/network/veth_netns.h"

using namespace kiln;
using namespace kiln::network::host;
using nlohmann::json;

namespace {

// Runs argv inside a namespace; checks every token would survive ssh.
class NetnsRunner : public CommandRunner {
public:
    explicit NetnsRunner(std::string ns) : ns_(std::move(ns)) {}
    Result<CommandResult> run(const CommandSpec& spec) override {
        for (const auto& a : spec.argv)
            if (!kiln::network::ssh_safe_token(a)) unsafe.push_back(a);
        calls.push_back(spec.argv);
        CommandSpec s = spec;
        s.argv = {"ip", "netns", "exec", ns_};
        s.argv.insert(s.argv.end(), spec.argv.begin(), spec.argv.end());
        return real_.run(s);
    }
    std::vector<std::string> unsafe;
    std::vector<std::vector<std::string>> calls;

private:
    std::string ns_;
    ProcessRunner real_;
};

// Scripted answers by argv[0], for the firmware path no test machine has.
class ScriptedRunner : public CommandRunner {
public:
    Result<CommandResult> run(const CommandSpec& spec) override {
        calls.push_back(spec.argv);
        auto it = answers.find(spec.argv.at(0));
        if (it == answers.end()) return make_error("exec", "exec.not_found", spec.argv[0] + ": not found");
        return it->second(spec);
    }
    std::map<std::string, std::function<CommandResult(const CommandSpec&)>> answers;
    std::vector<std::vector<std::string>> calls;
};

CommandResult ok_out(std::string out) {
    CommandResult r;
    r.exit_code = 0;
    r.out = std::move(out);
    return r;
}

}  // namespace

TEST_CASE("host nic applier sets the MTU on a veth and reads it back") {
    ::kiln::test::VethNetns v{"kiln-hn-"};
    auto runner = std::make_shared<NetnsRunner>(v.ns);
    HostNicApplier applier(runner);
    NicDesired want;
    want.ifname = "rdma0";
    want.mtu = 9000;

    auto seen = applier.observe(want);
    REQUIRE(seen);
    REQUIRE(seen->find("mtu"));
    CHECK(seen->find("mtu")->outcome == NicOutcome::Drift);
    CHECK(v.mtu("rdma0") == 1500);  // observe changes nothing

    auto report = applier.apply(want);
    REQUIRE(report);
    const NicItem* mtu = report->find("mtu");
    REQUIRE(mtu);
    CHECK(mtu->outcome == NicOutcome::Changed);
    CHECK(mtu->observed == "1500");
    CHECK(mtu->str() == "mtu: 1500 -> 9000 (changed)");
    CHECK(v.mtu("rdma0") == 9000);
    CHECK(report->converged());

    report = applier.apply(want);
    REQUIRE(report);
    CHECK(report->find("mtu")->outcome == NicOutcome::Ok);
    CHECK(runner->unsafe.empty());  // the same argv would run over SSH unchanged
}

TEST_CASE("host nic applier reports an MTU above the NIC's maximum as unsupported") {
    ::kiln::test::VethNetns v{"kiln-hn-"};
    HostNicApplier applier(std::make_shared<NetnsRunner>(v.ns));
    NicDesired want;
    want.ifname = "rdma0";
    want.mtu = 70000;  // veth's max_mtu is 65535
    auto report = applier.apply(want);
    REQUIRE(report);
    CHECK(report->find("mtu")->outcome == NicOutcome::Unsupported);
    CHECK(report->find("mtu")->detail.find("65535") != std::string::npos);
    CHECK(v.mtu("rdma0") == 1500);
}

TEST_CASE("host nic applier reports DCB, SR-IOV, ECN and firmware on a veth as unsupported") {
    ::kiln::test::VethNetns v{"kiln-hn-"};
    auto runner = std::make_shared<NetnsRunner>(v.ns);
    HostNicApplier applier(runner);
    network::RoceProfile profile;
    NicDesired want = nic_desired_from_profile(profile, "rdma0");
    want.sriov_vfs = 8;
    want.firmware = FirmwareWanted{true, 8, true};
    auto report = applier.apply(want);
    REQUIRE(report);
    for (const auto& i : report->items) UNSCOPED_INFO(i.str());

    CHECK(report->find("mtu")->outcome == NicOutcome::Changed);
    CHECK(v.mtu("rdma0") == 9000);
    for (const char* s : {"dscp_trust", "pfc"}) {
        const NicItem* i = report->find(s);
        REQUIRE(i);
        CHECK(i->outcome == NicOutcome::Unsupported);
        CHECK(i->detail.find("no DCB") != std::string::npos);
    }
    const NicItem* vfs = report->find("sriov_numvfs");
    REQUIRE(vfs);
    CHECK(vfs->outcome == NicOutcome::Unsupported);
    CHECK(vfs->detail.find("SR-IOV") != std::string::npos);
    REQUIRE(report->find("ecn roce_np prio 3"));
    CHECK(report->find("ecn roce_np prio 3")->outcome == NicOutcome::Unsupported);
    CHECK(report->find("ecn roce_rp prio 3")->outcome == NicOutcome::Unsupported);
    REQUIRE(report->find("firmware ATS_ENABLED"));
    CHECK(report->find("firmware ATS_ENABLED")->outcome == NicOutcome::Unsupported);
    CHECK(report->find("firmware ATS_ENABLED")->detail == "not a PCI device");
    CHECK_FALSE(report->converged());
    CHECK(runner->unsafe.empty());
    // Nothing tried to write what is not there.
    for (const auto& c : runner->calls) CHECK(c.at(0) != "tee");
}

TEST_CASE("host nic applier fails cleanly for a missing interface") {
    ::kiln::test::VethNetns v{"kiln-hn-"};
    HostNicApplier applier(std::make_shared<NetnsRunner>(v.ns));
    NicDesired want;
    want.ifname = "nosuch0";
    want.mtu = 9000;
    auto report = applier.apply(want);
    REQUIRE_FALSE(report);
    CHECK(report.error().code == "network.no_such_nic");
    CHECK(report.error().message.find("nosuch0") != std::string::npos);
    want.ifname = "../../etc";
    CHECK_FALSE(applier.apply(want));
}

TEST_CASE("ConnectX firmware differences are planned as needing a reboot, never applied") {
    auto runner = std::make_shared<ScriptedRunner>();
    runner->answers["ip"] = [](const CommandSpec&) { return ok_out(R"([{"ifname":"ens1f0","mtu":9000}])"); };
    runner->answers["readlink"] = [](const CommandSpec&) {
        return ok_out("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0\n");
    };
    runner->answers["mlxconfig"] = [](const CommandSpec&) {
        return ok_out(
            "Device #1:\n----------\n\nConfigurations:                 Next Boot\n"
            "         NUM_OF_VFS                  0\n"
            "         SRIOV_EN                    True(1)\n"
            "         ATS_ENABLED                 False(0)\n");
    };
    HostNicApplier applier(runner);
    NicDesired want;
    want.ifname = "ens1f0";
    want.firmware = FirmwareWanted{true, 8, true};
    auto report = applier.apply(want);
    REQUIRE(report);
    CHECK(report->find("firmware SRIOV_EN")->outcome == NicOutcome::Ok);
    const NicItem* ats = report->find("firmware ATS_ENABLED");
    REQUIRE(ats);
    CHECK(ats->outcome == NicOutcome::NeedsReboot);
    CHECK(ats->observed == "0");
    CHECK(ats->detail.find("mlxconfig -d 0000:3b:00.0 -y set NUM_OF_VFS=8 ATS_ENABLED=1") != std::string::npos);
    CHECK(report->find("firmware NUM_OF_VFS")->outcome == NicOutcome::NeedsReboot);
    for (const auto& c : runner->calls)
        for (const auto& a : c) CHECK(a != "set");  // only queried

    runner->answers.erase("mlxconfig");
    report = applier.apply(want);
    REQUIRE(report);
    CHECK(report->find("firmware SRIOV_EN")->outcome == NicOutcome::Unsupported);
    CHECK(report->find("firmware SRIOV_EN")->detail.find("mlxconfig") != std::string::npos);
}
