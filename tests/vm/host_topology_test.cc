// Host discovery against recorded sysfs trees (tests/fixtures/sysfs, written
// by its generate.py from vendor NCCL topology files).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "provisioner/vm/host_report.h"
#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/sysfs_reader.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln::vm;
using kiln::vm::test::FixtureCopy;
using kiln::vm::test::load_fixture;

namespace {

size_t count_kind(const HostTopology& h, DeviceKind k) {
    return static_cast<size_t>(
        std::count_if(h.devices.begin(), h.devices.end(), [k](const PciDevice& d) { return d.kind == k; }));
}

std::vector<std::string> v(std::initializer_list<const char*> items) {
    return {items.begin(), items.end()};
}

}  // namespace

TEST_CASE("sysfs cpulist parses ranges and lists and formats back", "[vm][sysfs]") {
    CHECK(parse_cpulist("0-3,8,10-11").value() == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
    CHECK(parse_cpulist("").value().empty());
    CHECK_FALSE(parse_cpulist("3-1").has_value());
    CHECK_FALSE(parse_cpulist("a").has_value());
    CHECK_FALSE(parse_cpulist("1,,2").has_value());
    CHECK(format_cpulist({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
}

TEST_CASE("pci addresses and device classes", "[vm][pci]") {
    CHECK(is_pci_address("0000:13:00.0"));
    CHECK(is_pci_address("10000:e0:1d.0"));  // VMD domain
    CHECK_FALSE(is_pci_address("0000:13:00.8"));
    CHECK_FALSE(is_pci_address("0000:13:0.0"));
    CHECK_FALSE(is_pci_address("0000:1G:00.0"));
    CHECK(classify(0x10de, 0x030200) == DeviceKind::gpu);
    CHECK(classify(0x10de, 0x030000) == DeviceKind::gpu);
    CHECK(classify(0x1002, 0x030000) == DeviceKind::other);  // not NVIDIA
    CHECK(classify(0x10de, 0x068000) == DeviceKind::nvswitch);
    CHECK(classify(0x15b3, 0x020700) == DeviceKind::nic);
    CHECK(classify(0x8086, 0x020000) == DeviceKind::nic);
    CHECK(classify(0x1000, 0x060400) == DeviceKind::bridge);
    CHECK(classify(0x10de, 0x040300) == DeviceKind::other);  // a GPU's audio function
}

TEST_CASE("nearest switch is the last upstream port in the bridge chain", "[vm][pci]") {
    PciDevice d;
    d.bridges = v({"0000:10:01.0"});
    CHECK(nearest_switch(d).empty());
    d.bridges = v({"0000:10:01.0", "0000:11:00.0", "0000:12:00.0"});
    CHECK(nearest_switch(d) == "0000:11:00.0");
    d.bridges = v({"0000:10:01.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0", "0000:14:02.0"});
    CHECK(nearest_switch(d) == "0000:13:00.0");
}

TEST_CASE("azure-ndv4 has 4 NUMA nodes with 8 A100s paired with 8 IB NICs", "[vm][discovery]") {
    const HostTopology h = load_fixture("azure-ndv4");
    REQUIRE(h.nodes.size() == 4);
    CHECK(format_cpulist(h.nodes[0].cpus) == "0-23");
    CHECK(format_cpulist(h.nodes[3].cpus) == "72-95");
    CHECK(h.cpu_count() == 96);
    CHECK(h.nodes[1].memory_total_kib == 256ull * 1024 * 1024);
    CHECK(h.nodes[1].memory_free_kib == 240ull * 1024 * 1024);
    CHECK(h.nodes[2].huge_1g.total == 240);
    CHECK(h.nodes[2].huge_1g.free == 240);
    CHECK(h.nodes[2].huge_2m.total == 0);

    CHECK(h.gpus.size() == 8);
    CHECK(h.nvswitches.size() == 6);
    CHECK(h.nics.size() == 9);  // 8 IB PFs + the management NIC
    CHECK(h.vf_count() == 8);
    CHECK(count_kind(h, DeviceKind::gpu) == 8);
    // 4 GPU switches and the NVSwitch board's
    CHECK(h.switches.size() == 5);

    const PciDevice* gpu0 = h.device("0000:13:00.0");
    REQUIRE(gpu0);
    CHECK(gpu0->kind == DeviceKind::gpu);
    CHECK(gpu0->id() == "10de:20b0");
    CHECK(gpu0->class_code == 0x030200);
    CHECK(gpu0->numa_node == 0);
    CHECK(gpu0->driver == "vfio-pci");
    CHECK(gpu0->host_bridge == "pci0000:10");
    CHECK(gpu0->bridges == v({"0000:10:01.0", "0000:11:00.0", "0000:12:00.0"}));

    // Two GPUs and two NICs per switch, as in the topology file: each GPU
    // pairs with both NICs of its switch.
    const Gpu* g = h.gpu("0000:13:00.0");
    REQUIRE(g);
    CHECK(g->pcie_switch == "0000:11:00.0");
    CHECK(g->nics == v({"0000:14:00.0", "0000:16:00.0"}));
    for (const auto& gg : h.gpus) {
        CHECK(gg.nics.size() == 2);
        for (const auto& n : gg.nics) CHECK(h.device(n)->numa_node == h.device(gg.address)->numa_node);
    }
    const PcieSwitch* sw = h.pcie_switch("0000:41:00.0");
    REQUIRE(sw);
    CHECK(sw->numa_node == 3);
    CHECK(sw->parent == "0000:40:01.0");
    CHECK(sw->downstream.size() == 4);
    CHECK(sw->gpus == v({"0000:43:00.0", "0000:45:00.0"}));
    CHECK(sw->nics == v({"0000:44:00.0", "0000:46:00.0"}));

    const PciDevice* nic0 = h.device("0000:14:00.0");
    REQUIRE(nic0);
    CHECK(nic0->is_infiniband());
    CHECK(nic0->driver == "mlx5_core");
    CHECK(nic0->rdma_devices == v({"mlx5_0"}));
    CHECK(nic0->sriov_totalvfs == 8);
    CHECK(nic0->sriov_numvfs == 1);
    CHECK(nic0->virtfns == v({"0000:14:00.1"}));
    const Nic* n = h.nic("0000:14:00.0");
    REQUIRE(n);
    CHECK(n->gpus == v({"0000:13:00.0", "0000:15:00.0"}));
    const PciDevice* vf = h.device("0000:14:00.1");
    REQUIRE(vf);
    CHECK(vf->is_vf());
    CHECK(vf->physfn == "0000:14:00.0");
    CHECK(vf->id() == "15b3:101c");
    CHECK(vf->iommu_group != nic0->iommu_group);

    // With ACS on every port, each function has a group of its own.
    for (const auto& grp : h.groups) CHECK(grp.devices.size() == 1);
    CHECK(h.groups.size() == h.devices.size());
    REQUIRE(gpu0->iommu_group);
    CHECK(h.group(*gpu0->iommu_group)->devices == v({"0000:13:00.0"}));

    const Nic* mgmt = h.nic("0000:61:00.0");
    REQUIRE(mgmt);
    CHECK(mgmt->pcie_switch.empty());
    CHECK(mgmt->gpus.empty());
}

TEST_CASE("azure-ndv5 has 2 NUMA nodes with one H100 and one NIC per switch", "[vm][discovery]") {
    const HostTopology h = load_fixture("azure-ndv5");
    REQUIRE(h.nodes.size() == 2);
    CHECK(h.nodes[0].cpus.size() == 48);
    CHECK(h.nodes[1].huge_1g.free == 900);
    CHECK(h.gpus.size() == 8);
    CHECK(h.nvswitches.size() == 4);
    CHECK(h.device(h.nvswitches[0])->id() == "10de:22a3");
    CHECK(h.switches.size() == 9);
    size_t per_node[2] = {0, 0};
    for (const auto& g : h.gpus) {
        CHECK(h.device(g.address)->id() == "10de:2330");
        REQUIRE(g.nics.size() == 1);
        CHECK(h.nic(g.nics[0])->gpus == std::vector<std::string>{g.address});
        ++per_node[h.node_of(*h.device(g.address))];
    }
    CHECK(per_node[0] == 4);
    CHECK(per_node[1] == 4);
    CHECK(h.gpu("0000:83:00.0")->nics == v({"0000:84:00.0"}));
    // acs_ctrl is recorded on the switch downstream ports
    const PciDevice* port = h.device("0000:12:00.0");
    REQUIRE(port);
    REQUIRE(port->acs_ctrl);
    CHECK(*port->acs_ctrl == 0x001d);
    CHECK((*port->acs_ctrl & kAcsReqRedirect) != 0);
    CHECK_FALSE(h.device("0000:13:00.0")->acs_ctrl.has_value());
}

TEST_CASE("aws-p4d pairs two A100s with one EFA NIC per switch", "[vm][discovery]") {
    const HostTopology h = load_fixture("aws-p4d");
    REQUIRE(h.nodes.size() == 2);
    CHECK(format_cpulist(h.nodes[0].cpus) == "0-23,48-71");
    CHECK(format_cpulist(h.nodes[1].cpus) == "24-47,72-95");
    CHECK(h.gpus.size() == 8);
    CHECK(h.nics.size() == 5);
    CHECK(h.vf_count() == 0);
    const Nic* efa = h.nic("0000:15:00.0");
    REQUIRE(efa);
    CHECK(efa->gpus == v({"0000:13:00.0", "0000:14:00.0"}));
    CHECK(efa->vfs.empty());
    const PciDevice* d = h.device("0000:15:00.0");
    CHECK(d->id() == "1d0f:efa0");
    CHECK_FALSE(d->is_infiniband());
    CHECK(d->rdma_devices == v({"efa_0"}));
    CHECK_FALSE(d->sriov_totalvfs.has_value());
    CHECK(h.gpu("0000:14:00.0")->nics == v({"0000:15:00.0"}));
}

TEST_CASE("a host without GPUs still discovers its NICs and VFs", "[vm][discovery]") {
    const HostTopology h = load_fixture("cpu-only");
    CHECK(h.nodes.size() == 2);
    CHECK(h.cpu_count() == 64);
    CHECK(h.gpus.empty());
    CHECK(h.nvswitches.empty());
    CHECK(h.switches.empty());
    REQUIRE(h.nics.size() == 2);
    CHECK(h.nics[0].vfs == v({"0000:11:00.1", "0000:11:00.2"}));
    CHECK(h.nics[1].vfs == v({"0000:21:00.1", "0000:21:00.2"}));
    CHECK(h.nodes[0].huge_2m.free == 4096);
    CHECK(h.nodes[0].huge_1g.total == 0);
    CHECK(h.device("0000:31:00.0")->kind == DeviceKind::other);
}

TEST_CASE("the broken host's GPU shares an IOMMU group with a SATA controller", "[vm][discovery]") {
    const HostTopology h = load_fixture("broken-shared-group");
    const PciDevice* gpu = h.device("0000:13:00.0");
    REQUIRE(gpu);
    REQUIRE(gpu->iommu_group);
    const IommuGroup* g = h.group(*gpu->iommu_group);
    REQUIRE(g);
    CHECK(g->devices == v({"0000:12:00.0", "0000:12:01.0", "0000:13:00.0", "0000:14:00.0"}));
    CHECK(h.device("0000:14:00.0")->kind == DeviceKind::other);
    CHECK(h.device("0000:12:00.0")->acs_ctrl == 0);
    CHECK_THAT(describe(h), Catch::Contains("warning: IOMMU group " + std::to_string(g->id) +
                                            " holds 0000:13:00.0 and other 0000:14:00.0 (1022:7901, class 0x010601)"));
    // The healthy node still pairs.
    CHECK(h.gpu("0000:23:00.0")->nics == v({"0000:24:00.0"}));
}

TEST_CASE("a missing numa_node names the file", "[vm][discovery][errors]") {
    FixtureCopy copy("azure-ndv5");
    std::filesystem::remove(copy.path("bus/pci/devices/0000:13:00.0/numa_node"));
    auto r = discover_host({copy.root()});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().domain == "sysfs");
    CHECK(r.error().code == "sysfs.missing");
    CHECK(r.error().str() == "sysfs: " + copy.root() + "/bus/pci/devices/0000:13:00.0/numa_node: missing");
}

TEST_CASE("malformed sysfs files name the file and the problem", "[vm][discovery][errors]") {
    FixtureCopy copy("cpu-only");
    SECTION("vendor") {
        copy.write("bus/pci/devices/0000:11:00.0/vendor", "0xzz\n");
        auto r = discover_host({copy.root()});
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "sysfs.malformed");
        CHECK(r.error().message ==
              copy.root() + "/bus/pci/devices/0000:11:00.0/vendor: expected a hex number, got \"0xzz\"");
    }
    SECTION("cpulist") {
        copy.write("devices/system/node/node1/cpulist", "16-8\n");
        auto r = discover_host({copy.root()});
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == copy.root() + "/devices/system/node/node1/cpulist: bad cpu list \"16-8\"");
    }
    SECTION("meminfo without MemFree") {
        copy.write("devices/system/node/node0/meminfo", "Node 0 MemTotal:       1024 kB\n");
        auto r = discover_host({copy.root()});
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == copy.root() + "/devices/system/node/node0/meminfo: no MemFree line");
    }
    SECTION("missing hugepage count") {
        std::filesystem::remove(copy.path("devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages"));
        auto r = discover_host({copy.root()});
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "sysfs.missing");
        CHECK(r.error().message ==
              copy.root() + "/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages: missing");
    }
    SECTION("device on an unknown NUMA node") {
        copy.write("bus/pci/devices/0000:21:00.0/numa_node", "7\n");
        auto r = discover_host({copy.root()});
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message ==
              copy.root() + "/bus/pci/devices/0000:21:00.0/numa_node: node 7 is not under devices/system/node");
    }
    SECTION("iommu group folder missing") {
        const HostTopology h = load_fixture("cpu-only");
        const int id = *h.device("0000:11:00.0")->iommu_group;
        const std::string rel = "kernel/iommu_groups/" + std::to_string(id);
        std::filesystem::remove_all(copy.path(rel));
        auto r = discover_host({copy.root()});
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message == copy.root() + "/" + rel + "/devices: missing");
    }
}

TEST_CASE("a sysfs root that does not exist names the node folder", "[vm][discovery][errors]") {
    auto r = discover_host({"/nonexistent/sys"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().str() == "sysfs: /nonexistent/sys/devices/system/node: missing");
}

TEST_CASE("JSON and text forms of the host model", "[vm][report]") {
    const HostTopology h = load_fixture("azure-ndv5");
    const auto j = to_json(h);
    CHECK(j["numa_nodes"].size() == 2);
    CHECK(j["numa_nodes"][0]["cpus"] == "0-47");
    CHECK(j["numa_nodes"][1]["hugepages"]["1048576kB"]["free"] == 900);
    CHECK(j["gpus"].size() == 8);
    CHECK(j["gpus"][0]["address"] == "0000:13:00.0");
    CHECK(j["gpus"][0]["nics"] == nlohmann::json::array({"0000:14:00.0"}));
    CHECK(j["nics"][0]["link"] == "infiniband");
    CHECK(j["nics"][0]["vfs"][0]["address"] == "0000:14:00.1");
    CHECK(j["nics"][0]["rdma_devices"][0] == "mlx5_0");
    CHECK(j["nvswitches"].size() == 4);
    CHECK(j["pci_devices"].size() == h.devices.size());
    CHECK(j["pci_devices"][0]["vendor"] == "0x1022");

    const std::string text = describe(h);
    CHECK_THAT(text, Catch::Contains("2 NUMA nodes, 96 CPUs, 8 GPUs, 9 NICs (8 VFs), 4 NVSwitches"));
    CHECK_THAT(text, Catch::Contains(
                         "node 1: cpus 48-95 (48), memory 1024 GiB (1008 GiB free), hugepages 1G 900 free of 960"));
    CHECK_THAT(text, !Catch::Contains("warning"));
    CHECK_THAT(text, Catch::Contains("gpu 0000:13:00.0 10de:2330"));
    CHECK_THAT(text, Catch::Contains("pairs with 0000:14:00.0"));
    CHECK_THAT(text, Catch::Contains("rdma mlx5_0, vfs 1/16 0000:14:00.1"));
    CHECK_THAT(text, Catch::Contains("switch 0000:11:00.0 under 0000:10:01.0, acs_ctrl 0x001d"));
    // every GPU, NIC PF and NVSwitch appears once
    for (const auto& g : h.gpus) {
        const auto first = text.find("gpu " + g.address);
        CHECK(first != std::string::npos);
        CHECK(text.find("gpu " + g.address, first + 1) == std::string::npos);
    }
}
