// Degraded PCIe links on the paths of a node's passthrough devices, on the
// recorded server shapes (tests/fixtures/sysfs: their GPUs idle at 2.5 GT/s,
// their VFs read Unknown/0) and on copies with one link broken.
#include <catch2/catch.hpp>

#include "provisioner/vm/pcie_links.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln;
using namespace kiln::vm;
using kiln::vm::test::FixtureCopy;
using kiln::vm::test::load_fixture;

namespace {

// Every GPU (with its companion functions) and NIC of the host, and one VF
// of each NIC that has them.
std::vector<std::string> passthrough(const HostTopology& host) {
    std::vector<std::string> out;
    for (const auto& g : host.gpus) {
        out.push_back(g.address);
        // Its HD audio function reports the GPU's idle link too.
        out.insert(out.end(), g.companions.begin(), g.companions.end());
    }
    for (const auto& n : host.nics) {
        out.push_back(n.address);
        if (!n.vfs.empty()) out.push_back(n.vfs.front());
    }
    return out;
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += x + "\n";
    return s;
}

}  // namespace

TEST_CASE("pcie links: the recorded servers have no degraded link, idle GPUs included") {
    for (const char* name : {"hgx-a100", "hgx-a100-acs-off", "pcie-4gpu-vf", "amd-nps4-rootport"}) {
        INFO(name);
        const HostTopology host = load_fixture(name);
        const auto devices = passthrough(host);
        REQUIRE_FALSE(devices.empty());
        const auto check = check_pcie_links(host, devices);
        INFO(joined(check.faults) << joined(check.unread));
        CHECK(check.faults.empty());
        CHECK(check.unread.empty());
        // Each device and every bridge above it: more links than devices.
        CHECK(check.links > host.gpus.size() + host.nics.size());
    }
}

TEST_CASE("pcie links: a host that reports no link capability is unread, never healthy") {
    // The cloud shapes come from topology files with no max_link_*: their
    // links cannot be compared.
    for (const char* name : {"azure-ndv4", "aws-p4d"}) {
        INFO(name);
        const HostTopology host = load_fixture(name);
        const auto devices = passthrough(host);
        const auto check = check_pcie_links(host, devices);
        CHECK(check.faults.empty());
        CHECK(check.links == 0);
        CHECK(check.unread.size() >= devices.size());
    }
}

TEST_CASE("pcie links: a narrow or slow link on the path is a fault that names the function") {
    const HostTopology clean = load_fixture("hgx-a100");
    REQUIRE_FALSE(clean.nics.empty());
    const std::string nic = clean.nics.front().address;
    const std::string gpu = clean.gpus.front().address;
    const PciDevice* nic_dev = clean.device(nic);
    REQUIRE(nic_dev != nullptr);
    REQUIRE(nic_dev->max_link_width == 16);
    REQUIRE_FALSE(nic_dev->bridges.empty());

    SECTION("a NIC at x8 of x16") {
        FixtureCopy copy("hgx-a100");
        copy.write("bus/pci/devices/" + nic + "/current_link_width", "8\n");
        auto host = discover_host({copy.root()});
        REQUIRE(host);
        const auto check = check_pcie_links(*host, {nic});
        REQUIRE(check.faults.size() == 1);
        CHECK_THAT(check.faults[0], Catch::Contains(nic) && Catch::Contains("x8 of x16"));
    }
    SECTION("a NIC's link at half speed") {
        FixtureCopy copy("hgx-a100");
        copy.write("bus/pci/devices/" + nic + "/current_link_speed", "8.0 GT/s PCIe\n");
        auto host = discover_host({copy.root()});
        REQUIRE(host);
        const auto check = check_pcie_links(*host, {nic});
        REQUIRE(check.faults.size() == 1);
        CHECK_THAT(check.faults[0], Catch::Contains("8.0 GT/s PCIe of 16.0 GT/s PCIe"));
    }
    SECTION("a GPU at x4: width counts on a GPU, idle speed does not") {
        FixtureCopy copy("hgx-a100");
        copy.write("bus/pci/devices/" + gpu + "/current_link_width", "4\n");
        auto host = discover_host({copy.root()});
        REQUIRE(host);
        REQUIRE(host->device(gpu)->link_speed != host->device(gpu)->max_link_speed);  // idle
        const auto check = check_pcie_links(*host, {gpu});
        REQUIRE(check.faults.size() == 1);
        CHECK_THAT(check.faults[0], Catch::Contains(gpu) && Catch::Contains("x4 of x16"));
        CHECK_THAT(check.faults[0], !Catch::Contains("GT/s"));
    }
    SECTION("a switch uplink above the NIC at x8: every device below it sees the fault") {
        FixtureCopy copy("hgx-a100");
        const std::string root_port = nic_dev->bridges.front();
        copy.write("bus/pci/devices/" + root_port + "/current_link_width", "8\n");
        auto host = discover_host({copy.root()});
        REQUIRE(host);
        const auto check = check_pcie_links(*host, {nic});
        REQUIRE(check.faults.size() == 1);
        CHECK_THAT(check.faults[0], Catch::Contains(root_port));
    }
    SECTION("a VF is checked through its PF") {
        const Nic* with_vfs = nullptr;
        const HostTopology vf_host = load_fixture("pcie-4gpu-vf");
        for (const auto& n : vf_host.nics)
            if (!n.vfs.empty()) with_vfs = &n;
        REQUIRE(with_vfs != nullptr);
        FixtureCopy copy("pcie-4gpu-vf");
        copy.write("bus/pci/devices/" + with_vfs->address + "/current_link_width", "8\n");
        auto host = discover_host({copy.root()});
        REQUIRE(host);
        const auto check = check_pcie_links(*host, {with_vfs->vfs.front()});
        REQUIRE(check.faults.size() == 1);
        CHECK_THAT(check.faults[0], Catch::Contains(with_vfs->address));
    }
    SECTION("a link the kernel does not report is unread, not healthy") {
        FixtureCopy copy("hgx-a100");
        copy.write("bus/pci/devices/" + nic + "/current_link_width", "0\n");
        auto host = discover_host({copy.root()});
        REQUIRE(host);
        const auto check = check_pcie_links(*host, {nic});
        CHECK(check.faults.empty());
        REQUIRE(check.unread.size() == 1);
        CHECK_THAT(check.unread[0], Catch::Contains(nic));
    }
}
