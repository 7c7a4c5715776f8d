// VM placement on the recorded hosts: good splits, and refusals with the
// reasons a user needs (which devices, which group, which node).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "provisioner/vm/placement.h"
#include "provisioner/vm/sysfs_reader.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln::vm;
using kiln::vm::test::load_fixture;

namespace {

PlacementRequest numa(int memory_gib = 0, int vcpus = 0) {
    PlacementRequest r;
    r.split = Split::numa;
    r.memory_gib = memory_gib;
    r.vcpus = vcpus;
    return r;
}

PlacementRequest whole(int memory_gib = 0, int vcpus = 0) {
    PlacementRequest r = numa(memory_gib, vcpus);
    r.split = Split::whole;
    return r;
}

std::vector<std::string> v(std::initializer_list<const char*> items) {
    return {items.begin(), items.end()};
}

// Puts `addr` into `group`, as a host without ACS at that port would.
void move_to_group(HostTopology& h, const std::string& addr, int group) {
    auto& dev = h.devices[h.index.at(addr)];
    for (auto& g : h.groups) {
        g.devices.erase(std::remove(g.devices.begin(), g.devices.end(), addr), g.devices.end());
        if (g.id == group) g.devices.push_back(addr);
    }
    dev.iommu_group = group;
}

}  // namespace

TEST_CASE("azure-ndv5 numa split gives two VMs of four GPU and VF pairs", "[vm][placement]") {
    const HostTopology h = load_fixture("azure-ndv5");
    auto r = place(h, numa());
    REQUIRE(r.ok());
    REQUIRE(r->vms.size() == 2);
    const VmPlacement* vm0 = r->vm("numa0");
    const VmPlacement* vm1 = r->vm("numa1");
    REQUIRE(vm0);
    REQUIRE(vm1);
    REQUIRE(vm0->cells.size() == 1);
    const VmCell& c0 = vm0->cells[0];
    CHECK(c0.host_node == 0);
    CHECK(c0.cpus.size() == 48);
    CHECK(c0.cpus.front() == 0);
    // memory 0: every free 1G hugepage of the node
    CHECK(c0.hugepages == 960);
    CHECK(c0.memory_kib == 960ull * 1024 * 1024);
    CHECK(vm1->cells[0].hugepages == 900);
    REQUIRE(c0.slots.size() == 4);
    CHECK(c0.slots[0].host_switch == "0000:11:00.0");
    CHECK(c0.slots[0].gpus == v({"0000:13:00.0"}));
    CHECK(c0.slots[0].nics == v({"0000:14:00.1"}));  // the VF, not the PF
    CHECK(vm0->gpus() == v({"0000:13:00.0", "0000:23:00.0", "0000:33:00.0", "0000:43:00.0"}));
    CHECK(vm1->gpus() == v({"0000:53:00.0", "0000:63:00.0", "0000:73:00.0", "0000:83:00.0"}));
    CHECK(vm1->devices().size() == 8);
    CHECK(c0.nvswitches.empty());
    // The management NIC and the NVSwitches stay with the host.
    for (const auto& vm : r->vms) {
        const auto d = vm.devices();
        CHECK(std::find(d.begin(), d.end(), "0000:a1:00.0") == d.end());
    }
    REQUIRE(r->notes.size() == 1);
    CHECK_THAT(r->notes[0], Catch::Contains("4 NVSwitches stay with the host"));
}

TEST_CASE("azure-ndv5 whole gives one VM with a cell per node and the NVSwitches", "[vm][placement]") {
    const HostTopology h = load_fixture("azure-ndv5");
    auto r = place(h, whole(512, 32));
    REQUIRE(r.ok());
    REQUIRE(r->vms.size() == 1);
    const VmPlacement& vm = r->vms[0];
    CHECK(vm.name == "whole");
    REQUIRE(vm.cells.size() == 2);
    CHECK(vm.vcpus() == 32);
    CHECK(vm.cells[0].cpus == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
    CHECK(vm.cells[1].cpus.front() == 48);
    CHECK(vm.cells[0].hugepages == 256);
    CHECK(vm.cells[1].hugepages == 256);
    CHECK(vm.memory_kib() == 512ull * 1024 * 1024);
    CHECK(vm.gpus().size() == 8);
    CHECK(vm.cells[0].nvswitches.size() == 4);
    CHECK(vm.devices().size() == 8 + 8 + 4);
    CHECK(r->notes.empty());

    const auto j = to_json(*r);
    CHECK(j["split"] == "whole");
    CHECK(j["vms"][0]["cells"][1]["cpus"] == "48-63");
    CHECK(j["vms"][0]["cells"][0]["slots"][0]["nics"][0] == "0000:14:00.1");
}

TEST_CASE("azure-ndv4 numa split keeps both GPU and NIC pairs of a switch together", "[vm][placement]") {
    const HostTopology h = load_fixture("azure-ndv4");
    auto r = place(h, numa(128, 16));
    REQUIRE(r.ok());
    REQUIRE(r->vms.size() == 4);
    for (const auto& vm : r->vms) {
        REQUIRE(vm.cells.size() == 1);
        REQUIRE(vm.cells[0].slots.size() == 1);
        CHECK(vm.cells[0].slots[0].gpus.size() == 2);
        CHECK(vm.cells[0].slots[0].nics.size() == 2);
        CHECK(vm.cells[0].hugepages == 128);
        CHECK(vm.vcpus() == 16);
    }
    CHECK(r->vm("numa2")->cells[0].slots[0].nics == v({"0000:34:00.1", "0000:36:00.1"}));
    CHECK(r->vm("numa3")->cells[0].cpus.front() == 72);
}

TEST_CASE("aws-p4d numa split passes the EFA PF beside its two GPUs", "[vm][placement]") {
    const HostTopology h = load_fixture("aws-p4d");
    auto r = place(h, numa(64));
    REQUIRE(r.ok());
    REQUIRE(r->vms.size() == 2);
    const VmCell& c = r->vm("numa1")->cells[0];
    REQUIRE(c.slots.size() == 2);
    CHECK(c.slots[0].gpus == v({"0000:33:00.0", "0000:34:00.0"}));
    CHECK(c.slots[0].nics == v({"0000:35:00.0"}));
    CHECK(c.hugepages == 64);
    CHECK(format_cpulist(c.cpus) == "24-47,72-95");
}

TEST_CASE("hugepages beyond the free pool of a node are refused", "[vm][placement][refused]") {
    const HostTopology h = load_fixture("aws-p4d");
    auto r = place(h, numa(256));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().domain == "vm");
    CHECK(r.error().code == "vm.resources");
    CHECK(r.error().message ==
          "numa split refused: vm numa1: node 1 needs 256 1G hugepages for 256 GiB, 100 free of 512");

    // Whole spreads 400 GiB as 200 per node: node 1 still falls short.
    auto w = place(h, whole(400));
    REQUIRE_FALSE(w.ok());
    CHECK_THAT(w.error().message, Catch::Contains("vm whole: node 1 needs 200 1G hugepages for 200 GiB, 100 free"));
    CHECK_THAT(w.error().message, !Catch::Contains("node 0"));
}

TEST_CASE("a GPU sharing its IOMMU group with a SATA controller is refused", "[vm][placement][refused]") {
    const HostTopology h = load_fixture("broken-shared-group");
    const int group = *h.device("0000:13:00.0")->iommu_group;
    const std::string reason = "IOMMU group " + std::to_string(group) +
                               " holds gpu 0000:13:00.0 (10de:2330) and other 0000:14:00.0 (1022:7901, class "
                               "0x010601), which is not a GPU, NIC, NVSwitch or bridge";
    for (const auto& req : {whole(), numa()}) {
        auto r = place(h, req);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "vm.iommu_group");
        CHECK(r.error().message == std::string(split_name(req.split)) + " split refused: " + reason);
    }
}

TEST_CASE("an IOMMU group spanning two VMs is refused but is fine in one", "[vm][placement][refused]") {
    HostTopology h = load_fixture("azure-ndv5");
    const int group = *h.device("0000:13:00.0")->iommu_group;
    move_to_group(h, "0000:53:00.0", group);  // a node 1 GPU into a node 0 GPU's group
    auto r = place(h, numa());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "vm.iommu_group");
    CHECK(r.error().message == "numa split refused: IOMMU group " + std::to_string(group) +
                                   " would be split across VMs: gpu 0000:13:00.0 (10de:2330) to vm numa0, "
                                   "gpu 0000:53:00.0 (10de:2330) to vm numa1");
    CHECK(place(h, whole()).ok());
}

TEST_CASE("a VF in its PF's IOMMU group is refused: the PF stays with the host", "[vm][placement][refused]") {
    HostTopology h = load_fixture("azure-ndv5");
    move_to_group(h, "0000:14:00.1", *h.device("0000:14:00.0")->iommu_group);
    auto r = place(h, whole());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("would be split: nic 0000:14:00.1 (15b3:101e) goes to vm whole, "
                                                  "nic 0000:14:00.0 (15b3:1021) stays with the host"));
}

TEST_CASE("a GPU without an IOMMU group is refused", "[vm][placement][refused]") {
    HostTopology h = load_fixture("aws-p4d");
    h.devices[h.index.at("0000:43:00.0")].iommu_group.reset();
    auto r = place(h, numa());
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("gpu 0000:43:00.0 (10de:20b0) has no IOMMU group"));
}

TEST_CASE("CPU requests beyond the node are refused", "[vm][placement][refused]") {
    const HostTopology h = load_fixture("azure-ndv5");
    auto r = place(h, numa(0, 64));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "vm.resources");
    CHECK(r.error().message ==
          "numa split refused: vm numa0: vcpus 64 exceeds the 48 CPUs of its NUMA nodes; "
          "vm numa1: vcpus 64 exceeds the 48 CPUs of its NUMA nodes");
    auto w = place(h, whole(0, 1));
    REQUIRE_FALSE(w.ok());
    CHECK_THAT(w.error().message, Catch::Contains("vcpus 1 is fewer than its 2 NUMA cells"));
}

TEST_CASE("a host without GPUs has no numa split but can run one whole VM", "[vm][placement]") {
    const HostTopology h = load_fixture("cpu-only");
    auto n = place(h, numa());
    REQUIRE_FALSE(n.ok());
    CHECK(n.error().str() == "vm: numa split refused: no NUMA node has GPUs");

    // No 1G pages were reserved on this host.
    auto g = place(h, whole(8));
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(g.error().message, Catch::Contains("vm whole: node 0 needs 4 1G hugepages for 4 GiB, 0 free of 0"));

    PlacementRequest req = whole(8);
    req.hugepage_kib = kHugePage2M;
    auto m = place(h, req);
    REQUIRE(m.ok());
    CHECK(m->vms[0].cells[0].hugepages == 2048);
    CHECK(m->vms[0].devices().empty());

    req.hugepages = false;
    req.memory_gib = 0;
    auto p = place(h, req);
    REQUIRE(p.ok());
    CHECK(p->vms[0].vcpus() == 64);
    CHECK(p->vms[0].cells[1].memory_kib == 120ull * 1024 * 1024);
    CHECK(p->vms[0].cells[1].hugepages == 0);
}

TEST_CASE("a fleet vm shape becomes a placement request", "[vm][placement]") {
    kiln::vm::VmShape shape;
    shape.name = "half";
    shape.split = "numa";
    shape.vcpus = 8;
    shape.memory_gib = 16;
    shape.hugepages = false;
    auto r = request_from_shape(shape);
    REQUIRE(r.ok());
    CHECK(r->split == Split::numa);
    CHECK(r->vcpus == 8);
    CHECK(r->memory_gib == 16);
    CHECK_FALSE(r->hugepages);

    shape.split = "socket";
    auto bad = request_from_shape(shape);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().str() == "vm: vm.half: split \"socket\" is not whole, numa or count");
}

TEST_CASE("count splits a host without GPUs into CPU-only VMs that fit its node together", "[vm][placement]") {
    const HostTopology h = load_fixture("cpu-only");
    PlacementRequest req;
    req.split = Split::count;
    req.count = 3;
    req.vcpus = 2;
    req.memory_gib = 4;
    req.hugepages = false;
    auto r = place(h, req);
    REQUIRE(r.ok());
    REQUIRE(r->vms.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(r->vms[i].name == "part" + std::to_string(i));
        REQUIRE(r->vms[i].cells.size() == 1);
        CHECK(r->vms[i].vcpus() == 2);
        CHECK(r->vms[i].memory_kib() == 4ull * 1024 * 1024);
        CHECK(r->vms[i].devices().empty());
    }

    // 40 VMs of 4 GiB do not fit the node's free memory together, though one does.
    req.count = 40;
    auto big = place(h, req);
    REQUIRE_FALSE(big.ok());
    CHECK_THAT(big.error().message, Catch::Contains("40 VMs need"));
    CHECK_THAT(big.error().message, Catch::StartsWith("count split refused"));

    // A GPU host is split whole or by numa.
    req.count = 2;
    auto gpu = place(load_fixture("azure-ndv5"), req);
    REQUIRE_FALSE(gpu.ok());
    CHECK_THAT(gpu.error().message, Catch::Contains("the host has 8 GPUs"));
}

TEST_CASE("a count shape needs memory per VM", "[vm][placement]") {
    kiln::vm::VmShape shape;
    shape.name = "cpu";
    shape.split = "count";
    shape.count = 2;
    auto r = request_from_shape(shape);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().str() == "vm: vm.cpu: split \"count\" with 2 VMs needs memory_gib per VM");
    shape.memory_gib = 1;
    auto ok = request_from_shape(shape);
    REQUIRE(ok.ok());
    CHECK(ok->split == Split::count);
    CHECK(ok->count == 2);
}

namespace {

// Every fabric PF of every node a GPU VM spans must be given to it exactly
// once (a VF, or the PF without VFs), and no function to two VMs or twice.
void check_fabric_given_once(const HostTopology& h, const Placement& p) {
    std::map<std::string, int> seen;
    for (const auto& vm : p.vms) {
        INFO("vm " << vm.name);
        const auto devs = vm.devices();
        for (const auto& d : devs) ++seen[d];
        if (vm.gpus().empty()) continue;
        for (const auto& cell : vm.cells) {
            for (const auto& n : h.nics) {
                if (!n.fabric || h.node_of(*h.device(n.address)) != cell.host_node) continue;
                INFO("nic " << n.address);
                int functions = 0;
                for (const auto& d : devs) {
                    if (d == n.address || std::find(n.vfs.begin(), n.vfs.end(), d) != n.vfs.end()) ++functions;
                }
                CHECK(functions == 1);
                if (!n.vfs.empty()) CHECK(std::find(devs.begin(), devs.end(), n.address) == devs.end());
            }
        }
    }
    for (const auto& [d, count] : seen) {
        INFO(d);
        CHECK(count == 1);
    }
}

}  // namespace

TEST_CASE("every VM with GPUs gets its nodes' fabric NICs, each function once", "[vm][placement][gpudirect]") {
    for (const char* fixture :
         {"hgx-a100", "pcie-4gpu-vf", "amd-nps4-rootport", "azure-ndv4", "azure-ndv5", "aws-p4d"}) {
        INFO(fixture);
        const HostTopology h = load_fixture(fixture);
        for (const auto& req : {whole(), numa()}) {
            auto p = place(h, req);
            REQUIRE(p.ok());
            check_fabric_given_once(h, *p);
        }
    }
}

TEST_CASE("hgx-a100 numa split: two GPUs and a VF of each port under their second-level switch",
          "[vm][placement][gpudirect]") {
    const HostTopology h = load_fixture("hgx-a100");
    auto p = place(h, numa());
    REQUIRE(p.ok());
    REQUIRE(p->vms.size() == 4);
    for (const auto& vm : p->vms) {
        INFO(vm.name);
        REQUIRE(vm.cells.size() == 1);
        REQUIRE(vm.cells[0].slots.size() == 1);
        const SwitchSlot& s = vm.cells[0].slots[0];
        CHECK(s.gpus.size() == 2);
        REQUIRE(s.nics.size() == 2);
        for (const auto& vf : s.nics) CHECK(h.device(vf)->is_vf());
        CHECK(h.device(s.nics[0])->physfn != h.device(s.nics[1])->physfn);
        // The slot mirrors the switch above both GPUs and the NIC.
        CHECK(s.host_switch == h.gpu(s.gpus[0])->pairing_switch);
        CHECK(h.pcie_switch(s.host_switch)->gpus == s.gpus);
    }
    CHECK(p->vm("numa3")->gpus() == v({"0000:07:00.0", "0000:0b:00.0"}));
}

TEST_CASE("hgx-a100 whole: the storage NIC without VFs is passed whole, once", "[vm][placement][gpudirect]") {
    const HostTopology h = load_fixture("hgx-a100");
    auto p = place(h, whole());
    REQUIRE(p.ok());
    const auto devs = p->vms[0].devices();
    for (const char* pf : {"0000:61:00.0", "0000:61:00.1"}) {
        CHECK(std::count(devs.begin(), devs.end(), std::string(pf)) == 1);
    }
    CHECK(std::count(devs.begin(), devs.end(), std::string("0000:e1:00.0")) == 0);  // management NIC
    CHECK(p->vms[0].gpus().size() == 8);
}

TEST_CASE("a PF without VFs reached by every GPU is passed once", "[vm][placement][gpudirect]") {
    HostTopology h = load_fixture("hgx-a100");
    // As if SR-IOV were off on every card: the PFs themselves are given.
    for (auto& n : h.nics) n.vfs.clear();
    for (const auto& req : {whole(), numa()}) {
        auto p = place(h, req);
        REQUIRE(p.ok());
        check_fabric_given_once(h, *p);
    }
}

TEST_CASE("root-port NICs reach the VMs of their node (NODE, PHB)", "[vm][placement][gpudirect]") {
    const HostTopology h = load_fixture("amd-nps4-rootport");
    auto p = place(h, numa());
    REQUIRE(p.ok());
    REQUIRE(p->vms.size() == 4);
    const VmPlacement* n0 = p->vm("numa0");
    REQUIRE(n0);
    // The GPU's slot, then one slot per NIC port.
    REQUIRE(n0->cells[0].slots.size() == 3);
    CHECK(n0->cells[0].slots[0].gpus == v({"0000:01:00.0"}));
    CHECK(n0->cells[0].slots[0].nics.empty());
    CHECK(n0->cells[0].slots[1].nics == v({"0000:11:00.2"}));
    CHECK(n0->cells[0].slots[2].nics == v({"0000:11:00.4"}));
    // Node 1 has no fabric NIC: GPU (and its audio) only.
    CHECK(p->vm("numa1")->devices() == v({"0000:21:00.0", "0000:21:00.1"}));
}

TEST_CASE("a GPU's audio function goes with it instead of refusing the group", "[vm][placement][gpudirect]") {
    const HostTopology h = load_fixture("amd-nps4-rootport");
    for (const auto& req : {whole(), numa()}) {
        auto p = place(h, req);
        REQUIRE(p.ok());
        for (const auto& vm : p->vms) {
            const auto devs = vm.devices();
            for (const auto& g : vm.gpus()) {
                const std::string audio = g.substr(0, g.size() - 1) + "1";
                CHECK(std::count(devs.begin(), devs.end(), audio) == 1);
            }
        }
    }
    // An unrelated device in the group still refuses it.
    HostTopology broken = h;
    const int group = *broken.device("0000:01:00.0")->iommu_group;
    move_to_group(broken, "0000:62:00.0", group);
    auto p = place(broken, numa());
    REQUIRE_FALSE(p.ok());
    CHECK_THAT(p.error().message, Catch::Contains("0000:62:00.0"));
}

TEST_CASE("GPUs of one switch without a NIC still share one slot", "[vm][placement][gpudirect]") {
    const HostTopology h = load_fixture("pcie-4gpu-vf");
    auto p = place(h, numa());
    REQUIRE(p.ok());
    const VmPlacement* n1 = p->vm("numa1");
    REQUIRE(n1);
    REQUIRE(n1->cells[0].slots.size() == 1);
    CHECK(n1->cells[0].slots[0].gpus.size() == 4);
    CHECK(n1->cells[0].slots[0].nics.empty());
    const VmPlacement* n0 = p->vm("numa0");
    REQUIRE(n0->cells[0].slots.size() == 1);
    CHECK(n0->cells[0].slots[0].gpus.size() == 4);
    CHECK(n0->cells[0].slots[0].nics.size() == 2);  // one VF of each port
}

TEST_CASE("a GPU that pairs with the NICs of two slots joins them into one", "[vm][placement][gpudirect]") {
    HostTopology h = load_fixture("hgx-a100");
    // Node 3: GPU 07 pairs with port 0 only, GPU 0b with port 1 only; a third
    // GPU (47, moved to node 3) pairs with both, so all three share a slot.
    auto gpu = [&](const std::string& a) -> Gpu& {
        for (auto& g : h.gpus) {
            if (g.address == a) return g;
        }
        FAIL("no gpu " << a);
        return h.gpus.front();
    };
    gpu("0000:07:00.0").nics = v({"0000:08:00.0"});
    gpu("0000:0b:00.0").nics = v({"0000:08:00.1"});
    gpu("0000:47:00.0").nics = v({"0000:08:00.0", "0000:08:00.1"});
    gpu("0000:47:00.0").pairing_switch = "0000:01:00.0";
    h.devices[h.index.at("0000:47:00.0")].numa_node = 3;
    auto p = place(h, numa());
    REQUIRE(p.ok());
    const VmPlacement* n3 = p->vm("numa3");
    REQUIRE(n3);
    REQUIRE(n3->cells[0].slots.size() == 1);
    CHECK(n3->cells[0].slots[0].gpus == v({"0000:07:00.0", "0000:0b:00.0", "0000:47:00.0"}));
    CHECK(n3->cells[0].slots[0].nics.size() == 2);
    check_fabric_given_once(h, *p);
}

TEST_CASE("hgx-a100 with ACS off: each top switch's IOMMU group goes whole to its node's VM",
          "[vm][placement][gpudirect]") {
    const HostTopology h = load_fixture("hgx-a100-acs-off");
    const int group = *h.device("0000:07:00.0")->iommu_group;
    REQUIRE(*h.device("0000:0b:00.0")->iommu_group == group);  // the fixture's point: one group per top switch
    REQUIRE(*h.device("0000:08:00.3")->iommu_group == group);
    auto p = place(h, numa());
    REQUIRE(p.ok());
    REQUIRE(p->vms.size() == 4);
    // Both GPUs, both PFs of the pair's card and all four VFs: the group's every endpoint.
    CHECK(p->vm("numa3")->devices() == v({"0000:07:00.0", "0000:08:00.0", "0000:08:00.1", "0000:08:00.2",
                                          "0000:08:00.3", "0000:08:00.4", "0000:08:00.5", "0000:0b:00.0"}));
    // All in the GPUs' one slot, beside them as on the host.
    REQUIRE(p->vm("numa3")->cells[0].slots.size() == 1);
    CHECK(p->vm("numa3")->cells[0].slots[0].nics.size() == 6);
    CHECK(std::any_of(p->notes.begin(), p->notes.end(), [&](const std::string& n) {
        return n.find("IOMMU group " + std::to_string(group) + " holds gpu 0000:07:00.0") != std::string::npos;
    }));
    CHECK(place(h, whole()).ok());

    // With ACS on, the same board passes one VF per port and keeps the PFs.
    auto on = place(load_fixture("hgx-a100"), numa());
    REQUIRE(on.ok());
    CHECK(on->vm("numa3")->devices() == v({"0000:07:00.0", "0000:08:00.2", "0000:08:00.4", "0000:0b:00.0"}));
}

TEST_CASE("hgx-a100 with ACS off: a group that would span two VMs is refused, naming it", "[vm][placement][refused]") {
    HostTopology h = load_fixture("hgx-a100-acs-off");
    const int group = *h.device("0000:07:00.0")->iommu_group;
    h.devices[h.index.at("0000:0b:00.0")].numa_node = 1;  // one GPU of the group read as node 1's
    auto r = place(h, numa());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "vm.iommu_group");
    CHECK_THAT(r.error().message,
               Catch::Contains("IOMMU group " + std::to_string(group) + " would be split across VMs: "));
    CHECK_THAT(r.error().message, Catch::Contains("gpu 0000:0b:00.0 (10de:20b0) to vm numa1"));
    CHECK(place(h, whole()).ok());  // one VM: the group is whole again
}
