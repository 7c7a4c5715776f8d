// GPU-NIC pairing on the shapes of real servers (tests/fixtures/sysfs:
// hgx-a100, pcie-4gpu-vf, amd-nps4-rootport), against the `nvidia-smi topo
// -m` relations of each source, transcribed in tests/fixtures/sysfs/topo-m/.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "provisioner/vm/host_report.h"
#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/pci_relation.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln::vm;
using kiln::vm::test::load_fixture;

namespace {

// One fixture's matrix: GPU address -> (RDMA name -> "PXB").
struct Matrix {
    std::vector<std::string> nics;
    std::vector<std::pair<std::string, std::vector<std::string>>> rows;
};

Matrix read_matrix(const std::string& fixture) {
    const std::string path = std::string(KILN_SYSFS_FIXTURES) + "/topo-m/" + fixture + ".txt";
    std::ifstream in(path);
    INFO(path);
    REQUIRE(in.good());
    Matrix m;
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream words(line);
        std::string first, w;
        words >> first;
        std::vector<std::string> rest;
        while (words >> w) rest.push_back(w);
        if (header) {
            REQUIRE(first == "gpu");
            m.nics = rest;
            header = false;
        } else {
            REQUIRE(rest.size() == m.nics.size());
            m.rows.emplace_back(first, rest);
        }
    }
    return m;
}

// nvidia-smi's order of nearness; SYS is no pairing at all.
int rank(const std::string& r) {
    static const std::map<std::string, int> order = {{"PIX", 0}, {"PXB", 1}, {"PHB", 2}, {"NODE", 3}, {"SYS", 4}};
    return order.at(r);
}

std::map<std::string, std::string> pf_by_rdma(const HostTopology& h) {
    std::map<std::string, std::string> out;
    for (const auto& n : h.nics) {
        for (const auto& r : h.device(n.address)->rdma_devices) out[r] = n.address;
    }
    return out;
}

const std::vector<std::string> kRealShapes = {"hgx-a100", "pcie-4gpu-vf", "amd-nps4-rootport"};

}  // namespace

TEST_CASE("relations follow nvidia-smi's legend on hand-made bridge chains", "[vm][pairing]") {
    HostTopology h;
    h.nodes = {NumaNode{0}, NumaNode{1}};
    auto dev = [](std::string hb, std::vector<std::string> bridges, int node) {
        PciDevice d;
        d.host_bridge = std::move(hb);
        d.bridges = std::move(bridges);
        d.numa_node = node;
        return d;
    };
    const PciDevice gpu = dev("pci0000:00", {"rp", "up1", "dn1", "up2", "dn2"}, 0);
    CHECK(pci_relation(h, gpu, dev("pci0000:00", {"rp", "up1", "dn1", "up2", "dn3"}, 0)) == PciRelation::pix);
    CHECK(pci_relation(h, gpu, dev("pci0000:00", {"rp", "up1", "dn4"}, 0)) == PciRelation::pxb);
    CHECK(shared_switch(gpu, dev("pci0000:00", {"rp", "up1", "dn4"}, 0)) == "up1");
    CHECK(shared_switch_depth(gpu, dev("pci0000:00", {"rp", "up1", "dn1", "up2", "dn3"}, 0)) == 3);
    CHECK(pci_relation(h, gpu, dev("pci0000:00", {"rp2"}, 0)) == PciRelation::phb);
    CHECK(pci_relation(h, gpu, dev("pci0000:10", {"rp3"}, 0)) == PciRelation::node);
    CHECK(pci_relation(h, gpu, dev("pci0000:80", {"rp4"}, 1)) == PciRelation::sys);
    CHECK(pci_relation(h, gpu, dev("pci0000:80", {"rp4"}, -1)) == PciRelation::sys);
    CHECK(std::string(relation_name(PciRelation::node)) == "NODE");
}

TEST_CASE("every GPU-NIC relation and every GPU's pairing equal the source's nvidia-smi matrix", "[vm][pairing]") {
    for (const auto& fixture : kRealShapes) {
        INFO(fixture);
        const HostTopology h = load_fixture(fixture);
        const Matrix m = read_matrix(fixture);
        const auto pf = pf_by_rdma(h);
        REQUIRE(m.rows.size() == h.gpus.size());
        size_t fabric = 0;
        for (const auto& n : h.nics) fabric += n.fabric ? 1 : 0;
        CHECK(m.nics.size() == fabric);
        const auto model = to_json(h);
        const std::string text = describe(h);
        for (const auto& [gpu_addr, cells] : m.rows) {
            INFO(gpu_addr);
            const Gpu* g = h.gpu(gpu_addr);
            REQUIRE(g);
            int best = 4;
            for (const auto& c : cells) best = std::min(best, rank(c));
            std::vector<std::string> want_nics, want_rel;
            std::string row = "  " + gpu_addr + ":";
            for (size_t i = 0; i < m.nics.size(); ++i) {
                INFO(m.nics[i]);
                REQUIRE(pf.count(m.nics[i]) == 1);
                const std::string& nic = pf.at(m.nics[i]);
                CHECK(relation_name(pci_relation(h, *h.device(gpu_addr), *h.device(nic))) == cells[i]);
                if (best < 4 && rank(cells[i]) == best) {
                    want_nics.push_back(nic);
                    want_rel.push_back(cells[i]);
                }
                row += " " + m.nics[i] + " " + cells[i];
            }
            std::sort(want_nics.begin(), want_nics.end());
            CHECK(g->nics == want_nics);
            std::vector<std::string> got_rel;
            for (auto r : g->nic_relations) got_rel.push_back(relation_name(r));
            CHECK(got_rel == want_rel);
            // The report says it in the same words.
            CHECK_THAT(text, Catch::Contains(row + "\n"));
            for (const auto& jg : model["gpus"]) {
                if (jg["address"] != gpu_addr) continue;
                REQUIRE(jg["relations"].size() == m.nics.size());
                for (size_t i = 0; i < m.nics.size(); ++i) {
                    CHECK(jg["relations"][i]["name"] == m.nics[i]);
                    CHECK(jg["relations"][i]["relation"] == cells[i]);
                }
            }
        }
    }
}

TEST_CASE("hgx-a100: both GPUs of a second-level switch pair with both ports of its NIC", "[vm][pairing]") {
    const HostTopology h = load_fixture("hgx-a100");
    CHECK(h.gpus.size() == 8);
    CHECK(h.switches.size() == 4 * 4 + 1);  // per pair: top, second level, one per GPU; the NVSwitch board's
    for (const auto& g : h.gpus) {
        INFO(g.address);
        REQUIRE(g.nics.size() == 2);
        // The GPU's own switch holds no NIC: the pairing is one level up.
        CHECK(g.pairing_switch != g.pcie_switch);
        CHECK(h.pcie_switch(g.pcie_switch)->nics.empty());
        CHECK(h.pcie_switch(g.pairing_switch)->gpus.size() == 2);
        for (const auto& n : g.nics) CHECK(h.nic(n)->gpus.size() == 2);
    }
    // The storage NIC (root port, node 0) and the management NIC pair with nothing.
    CHECK(h.nic("0000:61:00.0")->fabric);
    CHECK(h.nic("0000:61:00.0")->gpus.empty());
    CHECK_FALSE(h.nic("0000:e1:00.0")->fabric);
    CHECK(h.cpu.vendor == "AuthenticAMD");
    CHECK(h.cpu.familyid == 143);  // NCCL's encoding of family 0x17, as in nccl#1505's dump
    CHECK(h.cpu.modelid == 49);
}

TEST_CASE("a GPU's HD audio function in its IOMMU group is its companion", "[vm][pairing]") {
    const HostTopology h = load_fixture("amd-nps4-rootport");
    for (const auto& g : h.gpus) {
        INFO(g.address);
        const std::string audio = g.address.substr(0, g.address.size() - 1) + "1";
        CHECK(g.companions == std::vector<std::string>{audio});
        CHECK(h.device(audio)->iommu_group == h.device(g.address)->iommu_group);
    }
    CHECK_THAT(describe(h), Catch::Contains("with 0000:01:00.1"));
    CHECK_THAT(describe(h), !Catch::Contains("warning"));  // not a blocker
    // Elsewhere GPUs have none.
    for (const auto& g : load_fixture("azure-ndv5").gpus) CHECK(g.companions.empty());
}

TEST_CASE("link figures: capability kept apart from the idle link, a VF's Unknown read as none", "[vm][pairing]") {
    const HostTopology h = load_fixture("hgx-a100");
    const PciDevice* gpu = h.device("0000:07:00.0");
    CHECK(gpu->link_speed == "2.5 GT/s PCIe");
    CHECK(gpu->max_link_speed == "16.0 GT/s PCIe");
    CHECK(gpu->max_link_width == 16);
    const PciDevice* vf = h.device("0000:08:00.2");
    REQUIRE(vf->is_vf());
    CHECK(vf->link_speed.empty());
    CHECK_FALSE(vf->link_width.has_value());
    CHECK(vf->max_link_speed.empty());
}
