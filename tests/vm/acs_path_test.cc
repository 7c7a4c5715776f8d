// ACS P2P redirect cleared on the GPUDirect paths only, through setpci on a
// fake host that holds the hgx-a100 fixture's config bytes (ACS Control
// 0x001d = SV | RR | CR | UF on every root and downstream port, as a stock
// BIOS leaves it).
#include <catch2/catch.hpp>

#include <algorithm>

#include "provisioner/vm/acs_path.h"
#include "tests/vm/pci_config_fake_host.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln;
using namespace kiln::vm;
using kiln::vm::test::fixture_root;
using kiln::vm::test::load_fixture;
using kiln::vm::test::PciConfigFakeHost;

namespace {

const std::chrono::milliseconds kTimeout{5000};

std::vector<std::string> gpu_addresses(const HostTopology& host) {
    std::vector<std::string> out;
    for (const auto& g : host.gpus) out.push_back(g.address);
    return out;
}

std::vector<std::string> port_names(const std::vector<AcsPort>& ports) {
    std::vector<std::string> out;
    for (const auto& p : ports) out.push_back(p.port);
    return out;
}

// Per GPU pair of the fixture (root bus b): the second-level switch's three
// downstream ports (GPU, NIC, GPU) and each GPU's own switch's downstream port.
std::vector<std::string> hgx_path_ports() {
    std::vector<std::string> out;
    for (unsigned b : {0x00u, 0x40u, 0x80u, 0xB0u}) {
        char buf[32];
        for (unsigned bus_dev :
             {(b + 4) << 8 | 0x00, (b + 4) << 8 | 0x01, (b + 4) << 8 | 0x02, (b + 6) << 8, (b + 10) << 8}) {
            std::snprintf(buf, sizeof buf, "0000:%02x:%02x.0", bus_dev >> 8, bus_dev & 0xff);
            out.push_back(buf);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("ACS: the ports between each paired GPU and NIC, and no others", "[vm][acs]") {
    const HostTopology host = load_fixture("hgx-a100");
    const auto ports = acs_path_ports(host, gpu_addresses(host));
    CHECK(port_names(ports) == hgx_path_ports());
    // The NIC's port serves both GPUs of its pair, with both of the card's PFs.
    auto nic_port = std::find_if(ports.begin(), ports.end(), [](const AcsPort& p) { return p.port == "0000:04:01.0"; });
    REQUIRE(nic_port != ports.end());
    CHECK(nic_port->pairs == std::vector<std::string>{"0000:07:00.0 <-> 0000:08:00.0", "0000:07:00.0 <-> 0000:08:00.1",
                                                      "0000:0b:00.0 <-> 0000:08:00.0",
                                                      "0000:0b:00.0 <-> 0000:08:00.1"});
    // One GPU: its own switch's port, its second-level port and the NIC's.
    CHECK(port_names(acs_path_ports(host, {"0000:07:00.0"})) ==
          std::vector<std::string>{"0000:04:00.0", "0000:04:01.0", "0000:06:00.0"});
    CHECK(acs_path_ports(host, {}).empty());
}

TEST_CASE("ACS: apply clears RR and CR on the path ports, keeps SV, and is idempotent", "[vm][acs]") {
    const HostTopology host = load_fixture("hgx-a100");
    PciConfigFakeHost fake;
    fake.load(fixture_root("hgx-a100"));
    REQUIRE(fake.acs_ctrl("0000:04:00.0") == 0x001du);
    const auto ports = acs_path_ports(host, gpu_addresses(host));

    auto planned = plan_acs(fake, ports, kTimeout);
    REQUIRE(planned.ok());
    REQUIRE(planned->size() == 20);
    CHECK(planned->front().text() == "0000:04:00.0 ACSCtl 0x001d -> 0x0011");
    CHECK(fake.writes.empty());

    auto done = apply_acs(fake, ports, kTimeout);
    REQUIRE(done.ok());
    CHECK(done->size() == 20);
    std::vector<std::string> written;
    for (const auto& w : fake.writes) {
        CHECK(w == std::vector<std::string>{"setpci", "-s", w[2], "ECAP_ACS+6.w=0000:000c"});
        written.push_back(w[2]);
    }
    std::sort(written.begin(), written.end());
    CHECK(written == hgx_path_ports());
    for (const auto& p : hgx_path_ports()) CHECK(fake.acs_ctrl(p) == 0x0011u);  // SV and UF kept
    // Off the paths nothing moved: root ports, the top switch, the NVSwitches' switch.
    for (const char* other : {"0000:00:01.1", "0000:02:00.0", "0000:02:01.0", "0000:c2:00.0", "0000:60:03.1"})
        CHECK(fake.acs_ctrl(other) == 0x001du);

    // Converged: read only, nothing planned, nothing written.
    fake.writes.clear();
    auto again = apply_acs(fake, ports, kTimeout);
    REQUIRE(again.ok());
    CHECK(again->empty());
    CHECK(fake.writes.empty());
    auto replan = plan_acs(fake, ports, kTimeout);
    REQUIRE(replan.ok());
    CHECK(replan->empty());
}

TEST_CASE("ACS: a host whose paths are open already plans nothing", "[vm][acs]") {
    const HostTopology host = load_fixture("pcie-4gpu-vf");
    PciConfigFakeHost fake;
    fake.load(fixture_root("pcie-4gpu-vf"));
    const auto ports = acs_path_ports(host, gpu_addresses(host));
    REQUIRE_FALSE(ports.empty());
    auto planned = plan_acs(fake, ports, kTimeout);
    REQUIRE(planned.ok());
    CHECK(planned->empty());
}

TEST_CASE("ACS: refusals name the port and leave the rest as read", "[vm][acs]") {
    const HostTopology host = load_fixture("hgx-a100");
    PciConfigFakeHost fake;
    fake.load(fixture_root("hgx-a100"));
    const auto ports = acs_path_ports(host, gpu_addresses(host));

    SECTION("no setpci on the host") {
        fake.has_setpci = false;
        auto r = apply_acs(fake, ports, kTimeout);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "vm.setpci_missing");
        CHECK(r.error().message.find("pciutils") != std::string::npos);
        CHECK(fake.writes.empty());
    }
    SECTION("the write is refused") {
        fake.refuse_writes = true;
        auto r = apply_acs(fake, ports, kTimeout);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "vm.acs_write_failed");
        CHECK(r.error().message.find("0000:04:00.0") != std::string::npos);
        CHECK(r.error().message.find("Permission denied") != std::string::npos);
        CHECK(fake.acs_ctrl("0000:04:00.0") == 0x001du);
    }
    SECTION("the bits do not change") {
        fake.ignores_writes.insert("0000:04:01.0");
        auto r = apply_acs(fake, ports, kTimeout);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "vm.acs_not_applied");
        CHECK(r.error().message ==
              "0000:04:01.0 ACSCtl wanted 0x0011, read 0x001d after the write (P2P redirect still on)");
    }
    SECTION("a port without an ACS capability") {
        fake.config["0000:06:00.0"].replace(0x100, 2, std::string("\x01\x00", 2));  // AER where ACS was
        auto r = plan_acs(fake, ports, kTimeout);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "vm.acs_unreadable");
        CHECK(r.error().message.find("0000:06:00.0") != std::string::npos);
    }
}
