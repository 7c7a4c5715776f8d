// PCI config space parsing and the GPUDirect path verdict per GPU-NIC pair,
// on the real-server shapes (their `config` files are written by
// tests/fixtures/sysfs/generate.py as root would read them).
#include <catch2/catch.hpp>

#include <fstream>

#include "provisioner/vm/gdr_path.h"
#include "provisioner/vm/host_report.h"
#include "provisioner/vm/pci_config.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln::vm;
using kiln::vm::test::FixtureCopy;
using kiln::vm::test::load_fixture;

namespace {

void put16(std::string& b, size_t at, unsigned v) {
    b[at] = static_cast<char>(v & 0xff);
    b[at + 1] = static_cast<char>(v >> 8 & 0xff);
}

// A downstream port's config: PCIe capability (Gen4 x16, running Gen1 x8),
// then ACS at 0x100 pointing on to ATS at 0x140.
std::string sample_config() {
    std::string b(4096, '\0');
    put16(b, 0x06, 0x0010);
    b[0x34] = 0x40;
    b[0x40] = 0x10;
    put16(b, 0x4c, 4 | 16 << 4);
    put16(b, 0x52, 1 | 8 << 4);
    put16(b, 0x100, 0x000d);
    put16(b, 0x102, 1 | 0x140 << 4);
    put16(b, 0x106, 0x001d);
    put16(b, 0x140, 0x000f);
    put16(b, 0x146, 0x8000);
    return b;
}

// Rewrites 16 bits of a fixture copy's config file (through bus/pci/devices).
void patch_config(const FixtureCopy& copy, const std::string& addr, size_t at, unsigned v) {
    const std::string path = copy.path("bus/pci/devices/" + addr + "/config");
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    f.seekp(static_cast<std::streamoff>(at));
    const char bytes[2] = {static_cast<char>(v & 0xff), static_cast<char>(v >> 8 & 0xff)};
    f.write(bytes, 2);
    REQUIRE(f.good());
}

}  // namespace

TEST_CASE("config space: link capability and status, ACS and ATS, as far as it was readable", "[vm][gdr]") {
    const std::string b = sample_config();
    const PciConfig full = parse_pci_config(b);
    REQUIRE(full.link_cap);
    CHECK(full.link_cap->speed == 4);
    CHECK(full.link_cap->width == 16);
    CHECK(full.link_status->speed == 1);
    CHECK(full.link_status->width == 8);
    CHECK(full.extended);
    CHECK(full.acs_ctrl == 0x001d);
    CHECK(full.ats_enabled == true);
    CHECK(pcie_speed_name(4) == "16.0 GT/s");
    // What a non-root reader gets: 64 bytes, nothing past the header.
    const PciConfig user = parse_pci_config(b.substr(0, 64));
    CHECK_FALSE(user.link_cap.has_value());
    CHECK_FALSE(user.extended);
    const PciConfig first = parse_pci_config(b.substr(0, 256));
    CHECK(first.link_cap.has_value());
    CHECK_FALSE(first.acs_ctrl.has_value());
    // An extended capability pointing at itself ends the walk.
    std::string loop = b;
    put16(loop, 0x102, 1 | 0x100 << 4);
    const PciConfig l = parse_pci_config(loop);
    CHECK(l.acs_ctrl == 0x001d);
    CHECK_FALSE(l.ats_enabled.has_value());
}

TEST_CASE("hgx-a100: ACS redirect on the switch ports between GPU and NIC blocks the GDR path", "[vm][gdr]") {
    const HostTopology h = load_fixture("hgx-a100");
    const auto paths = gdr_paths(h);
    CHECK(paths.size() == 16);  // 8 GPUs x 2 ports
    const GdrPath p = gdr_path(h, "0000:07:00.0", "0000:08:00.0");
    CHECK(p.relation == PciRelation::pxb);
    CHECK(p.ports == std::vector<std::string>{"0000:04:00.0", "0000:06:00.0", "0000:04:01.0"});
    CHECK(p.ready == GdrReady::no);
    CHECK(describe(p) ==
          "GDR path ready: no, because ACS redirects P2P at 0000:04:00.0 (ACSCtl 0x001d); ACS redirects P2P at "
          "0000:06:00.0 (ACSCtl 0x001d); ACS redirects P2P at 0000:04:01.0 (ACSCtl 0x001d)");
    CHECK_THAT(kiln::vm::describe(h), Catch::Contains("gdr 0000:07:00.0 <-> 0000:08:00.0 (PXB): GDR path ready: no"));
    CHECK(to_json(h)["gdr_paths"][0]["ready"] == "no");
}

TEST_CASE("the GDR path turns ready with ACS redirect off on its ports, and not without ATS", "[vm][gdr]") {
    FixtureCopy copy("hgx-a100");
    for (const char* port : {"0000:04:00.0", "0000:06:00.0", "0000:04:01.0"}) patch_config(copy, port, 0x106, 0x0011);
    {
        auto h = discover_host({copy.root()});
        REQUIRE(h.ok());
        const GdrPath p = gdr_path(*h, "0000:07:00.0", "0000:08:00.0");
        CHECK(describe(p) == "GDR path ready: yes");
        // The other GPU of the pair still crosses a redirecting port of its own.
        CHECK(gdr_path(*h, "0000:0b:00.0", "0000:08:00.0").ready == GdrReady::no);
    }
    patch_config(copy, "0000:08:00.0", 0x106, 0x0000);  // ATS off in the NIC
    auto h = discover_host({copy.root()});
    REQUIRE(h.ok());
    CHECK(describe(gdr_path(*h, "0000:07:00.0", "0000:08:00.0")) ==
          "GDR path ready: no, because ATS is off on 0000:08:00.0 (ConnectX: mlxconfig ATS_ENABLED=true, then a "
          "reboot)");
    // A link that trained narrower than it can is named.
    patch_config(copy, "0000:07:00.0", 0x52, 4 | 8 << 4);
    auto h2 = discover_host({copy.root()});
    REQUIRE(h2.ok());
    CHECK_THAT(describe(gdr_path(*h2, "0000:07:00.0", "0000:08:00.0")), Catch::Contains("0000:07:00.0 runs x8 of x16"));
}

TEST_CASE("GDR verdicts on the other shapes: ready, across the root complex, unknown without config", "[vm][gdr]") {
    const HostTopology pcie = load_fixture("pcie-4gpu-vf");
    for (const auto& p : gdr_paths(pcie)) {
        INFO(p.gpu << " " << p.nic);
        CHECK(p.relation == PciRelation::pix);
        CHECK(describe(p) == "GDR path ready: yes");
    }
    const HostTopology amd = load_fixture("amd-nps4-rootport");
    const GdrPath node = gdr_path(amd, "0000:01:00.0", "0000:11:00.0");
    CHECK(node.ready == GdrReady::no);
    CHECK_THAT(describe(node), Catch::Contains("they share no PCIe switch (NODE)"));
    // azure-ndv5 records no config: ACS from its acs_ctrl files, ATS unknown.
    const HostTopology ndv5 = load_fixture("azure-ndv5");
    const GdrPath nd = gdr_path(ndv5, "0000:13:00.0", "0000:14:00.0");
    CHECK(nd.ready == GdrReady::no);
    CHECK_THAT(describe(nd), Catch::Contains("ATS of 0000:14:00.0 unknown"));
    // A non-root read (64 bytes) makes the verdict unknown, not yes.
    FixtureCopy copy("pcie-4gpu-vf");
    for (const char* f : {"0000:5a:04.0", "0000:5a:14.0", "0000:5f:00.0"}) {
        std::filesystem::resize_file(copy.path("bus/pci/devices/" + std::string(f) + "/config"), 64);
    }
    auto h = discover_host({copy.root()});
    REQUIRE(h.ok());
    const GdrPath u = gdr_path(*h, "0000:5b:00.0", "0000:5f:00.0");
    CHECK(u.ready == GdrReady::unknown);
    CHECK_THAT(describe(u), Catch::StartsWith("GDR path ready: unknown, because ACS of 0000:5a:04.0 unknown"));
}
