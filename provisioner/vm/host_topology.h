// Host topology discovery (DESIGN §3 vm): what a GPU host has, read from
// sysfs. NUMA nodes with their CPUs, memory and hugepages; every PCI
// function; the GPUs, NICs (with their VFs and RDMA names) and NVSwitches
// among them; IOMMU groups; the PCIe switches; and which NICs pair with
// which GPU, as nvidia-smi sees it (pci_relation.h). Placement, the domain XML
// and the guest's NCCL topology file are all derived from this one model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "provisioner/core/result.h"
#include "provisioner/vm/pci_device.h"
#include "provisioner/vm/pci_relation.h"

namespace kiln::vm {

struct HugePagePool {
    uint64_t total = 0;  // nr_hugepages
    uint64_t free = 0;   // free_hugepages
};

inline constexpr uint64_t kHugePage1G = 1048576;  // kB, as in hugepages-1048576kB
inline constexpr uint64_t kHugePage2M = 2048;

struct NumaNode {
    int id = 0;
    std::vector<int> cpus;  // sorted
    uint64_t memory_total_kib = 0;
    uint64_t memory_free_kib = 0;
    HugePagePool huge_1g;
    HugePagePool huge_2m;

    // The pool for a page size in kB; nullptr for sizes kiln does not read.
    const HugePagePool* pool(uint64_t page_kib) const;
};

struct IommuGroup {
    int id = 0;
    std::vector<std::string> devices;  // addresses, sorted
};

// A PCIe switch, named by its upstream port.
struct PcieSwitch {
    std::string upstream;                 // "0000:11:00.0"
    std::string parent;                   // root port, or the downstream port of an enclosing switch
    std::vector<std::string> downstream;  // its downstream ports
    int numa_node = -1;
    std::vector<std::string> gpus;  // beneath it at any depth
    std::vector<std::string> nics;  // NIC PFs beneath it at any depth
};

// A GPU's NICs: the fabric NIC PFs under the deepest switch it shares with
// any (PIX, else PXB); when no switch holds one, the fabric NICs on root
// ports of its NUMA node (PHB or NODE); none otherwise (SYS). Several NICs
// per GPU (dual-port cards, two NICs per GPU) and several GPUs per NIC are
// both normal.
struct Gpu {
    std::string address;
    std::string pcie_switch;                 // nearest switch's upstream port; "" when on a root port
    std::string pairing_switch;              // the switch it shares with its NICs; "" for root-port NICs
    std::vector<std::string> nics;           // NIC PFs it pairs with, by address
    std::vector<PciRelation> nic_relations;  // each one's relation, same order
    // Other functions of the GPU's own device in its IOMMU group (HD audio,
    // USB-C controller): they go wherever the GPU goes.
    std::vector<std::string> companions;
};

// A NIC PF. Fabric NICs are those with an RDMA device (infiniband/*), as
// nvidia-smi lists them; the others (a management NIC) stay with the host.
struct Nic {
    std::string address;  // the PF (or a NIC without SR-IOV)
    bool fabric = false;
    std::string pcie_switch;
    std::vector<std::string> vfs;   // its VFs' addresses
    std::vector<std::string> gpus;  // GPUs it pairs with
};

// The CPU as NCCL's topology file names it (vendor="GenuineIntel"
// familyid="6" modelid="143"): family and model folded with their CPUID
// extended fields, as NCCL computes them. Empty when unknown.
struct CpuId {
    std::string vendor;  // vendor_id of /proc/cpuinfo
    int familyid = -1;
    int modelid = -1;
};

struct HostTopology {
    std::string root;  // the sysfs root read
    CpuId cpu;
    std::vector<NumaNode> nodes;       // by id
    std::vector<PciDevice> devices;    // every PCI function, by address
    std::vector<IommuGroup> groups;    // by id
    std::vector<PcieSwitch> switches;  // by upstream port
    std::vector<Gpu> gpus;             // by address
    std::vector<Nic> nics;             // PFs only, by address
    std::vector<std::string> nvswitches;

    const PciDevice* device(const std::string& address) const;
    const NumaNode* node(int id) const;
    const IommuGroup* group(int id) const;
    const PcieSwitch* pcie_switch(const std::string& upstream) const;
    const Gpu* gpu(const std::string& address) const;
    const Nic* nic(const std::string& address) const;
    // The device's NUMA node, with -1 read as 0 on a single-node host;
    // -1 when unknown on a host with several nodes.
    int node_of(const PciDevice& dev) const;
    size_t cpu_count() const;
    size_t vf_count() const;

    // Rebuilds the address index after `devices` changed (tests edit it).
    void reindex();
    std::map<std::string, size_t> index;  // address -> devices[]
};

struct DiscoverOptions {
    std::string sysfs_root = "/sys";
    // /proc/cpuinfo for the CPU's vendor, family and model. "" reads
    // <sysfs_root>/cpuinfo (a recorded copy, as fixtures keep it) when present,
    // else /proc/cpuinfo for the root /sys.
    std::string cpuinfo;
};

// Reads the whole model. Fails on the first missing or malformed file a
// host must have, naming it; optional files (SR-IOV, RDMA, acs_ctrl, driver)
// are read when present.
Result<HostTopology> discover_host(const DiscoverOptions& options = {});

// The nearest switch above a device: the last upstream port in its bridge
// chain. Chains alternate root port, upstream, downstream, upstream, ...
// so the upstream ports sit at odd positions. "" when there is none.
std::string nearest_switch(const PciDevice& dev);

}  // namespace kiln::vm
