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
