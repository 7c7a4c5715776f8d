#include <catch2/catch.hpp>

#include <set>

#include "provisioner/vm/guest_pci_layout.h"
#include "provisioner/vm/nccl_topo.h"
#include "tests/vm/vm_xml_support.h"

using namespace kiln;
using namespace kiln::vm;
using namespace kiln::vm::test;

TEST_CASE("NCCL topology matches the golden file for each fixture host and split", "[vm][nccl_topo]") {
    for (const auto& c : golden_cases()) {
        const HostTopology host = load_fixture(c.fixture);
        const Placement p = place_case(host, c);
        for (const auto& vm : p.vms) {
            auto topo = nccl_topology(host, vm);
            REQUIRE(topo.ok());
            check_golden(c.fixture + "-" + split_name(c.split) + "-" + vm.name + ".nccl.xml", *topo);
        }
    }
}

TEST_CASE("NCCL topology puts each GPU and its NIC under one switch at their guest addresses", "[vm][nccl_topo]") {
    const HostTopology host = load_fixture("azure-ndv5");
    const Placement p = place_case(host, {"azure-ndv5", Split::whole, kHugePage1G});
    const VmPlacement& vm = p.vms[0];
    const GuestPciLayout layout = plan_guest_pci(vm);
    const XmlDoc doc(*nccl_topology(host, vm));
    CHECK(doc.values("/system/cpu").size() == 2);
    CHECK(doc.value("/system/cpu[1]", "numaid") == "0");
    // 96 vCPUs, 48 per cell: cell 1 holds vCPUs 48-95.
    CHECK(doc.value("/system/cpu[2]", "affinity") == "ffffffff,ffff0000,00000000");
    for (const auto& cell : vm.cells) {
        for (const auto& slot : cell.slots) {
            const std::string gpu = layout.device(slot.gpus[0])->guest;
            const std::string nic = layout.device(slot.nics[0])->guest;
            const std::string sw_of_gpu = doc.value("/system/cpu/pci[pci/@busid='" + gpu + "']", "busid");
            const std::string sw_of_nic = doc.value("/system/cpu/pci[pci/@busid='" + nic + "']", "busid");
            CHECK(!sw_of_gpu.empty());
            CHECK(sw_of_gpu == sw_of_nic);
            CHECK(doc.value("/system/cpu/pci/pci[@busid='" + gpu + "']", "class") == "0x030200");
            CHECK(doc.value("/system/cpu/pci/pci[@busid='" + gpu + "']", "link_speed") == "32.0 GT/s PCIe");
            // The VF has no link of its own: its PF's is written.
            CHECK(doc.value("/system/cpu/pci/pci[@busid='" + nic + "']", "link_width") == "16");
        }
    }
}

TEST_CASE("affinity masks are 32-bit words, most significant first", "[vm][nccl_topo]") {
    CHECK(affinity_mask(0, 4, 4) == "0000000f");
    CHECK(affinity_mask(32, 32, 64) == "ffffffff,00000000");
    CHECK(affinity_mask(0, 24, 96) == "00000000,00000000,00ffffff");
}

TEST_CASE("NCCL topology carries capability links, the PF's link for VFs and the CPU's identity",
          "[vm][nccl_topo][gpudirect]") {
    struct Want {
        const char* fixture;
        Split split;
        const char* gpu_speed;
        const char* vendor;
        const char* familyid;
        const char* modelid;
    };
    for (const Want w : {Want{"hgx-a100", Split::numa, "16.0 GT/s PCIe", "AuthenticAMD", "143", "49"},
                         Want{"pcie-4gpu-vf", Split::numa, "8.0 GT/s PCIe", "GenuineIntel", "6", "85"}}) {
        INFO(w.fixture);
        const HostTopology host = load_fixture(w.fixture);
        const Placement p = place_case(host, {w.fixture, w.split, kHugePage1G});
        const VmPlacement& vm = p.vms[0];
        const GuestPciLayout layout = plan_guest_pci(vm);
        const XmlDoc doc(*nccl_topology(host, vm));
        CHECK(doc.value("/system/cpu", "vendor") == w.vendor);
        CHECK(doc.value("/system/cpu", "familyid") == w.familyid);
        CHECK(doc.value("/system/cpu", "modelid") == w.modelid);
        REQUIRE(!vm.cells[0].slots.empty());
        const SwitchSlot& s = vm.cells[0].slots[0];
        REQUIRE(!s.nics.empty());
        const std::string sw =
            doc.value("/system/cpu/pci[pci/@busid='" + layout.device(s.gpus[0])->guest + "']", "busid");
        for (const auto& g : s.gpus) {
            const std::string at = "/system/cpu/pci/pci[@busid='" + layout.device(g)->guest + "']";
            CHECK(host.device(g)->link_speed == "2.5 GT/s PCIe");  // idle on the host...
            CHECK(doc.value(at, "link_speed") == w.gpu_speed);     // ...its capability in the file
        }
        for (const auto& n : s.nics) {
            const PciDevice* vf = host.device(n);
            REQUIRE(vf->is_vf());
            const PciDevice* pf = host.device(vf->physfn);
            const std::string at = "/system/cpu/pci/pci[@busid='" + layout.device(n)->guest + "']";
            CHECK(doc.value("/system/cpu/pci[pci/@busid='" + layout.device(n)->guest + "']", "busid") == sw);
            CHECK(doc.value(at, "link_speed") == pf->max_link_speed);
            CHECK(doc.value(at, "link_width") == std::to_string(*pf->max_link_width));
            CHECK(doc.value(at, "link_speed") != "Unknown");
        }
    }
}
