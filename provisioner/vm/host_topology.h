// Host topology discovery (DESIGN §3 vm): what a GPU host has, read from
// sysfs. NUMA nodes with their CPUs, memory and hugepages; every PCI
// function; the GPUs, NICs (with their VFs and RDMA names) and NVSwitches
// among them; IOMMU groups; the PCIe switches; and which NICs pair with
// which GPU (same nearest switch). Placement (placement.h), the domain XML
// and the guest's NCCL topology file are all derived from this one model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "provisioner/core/result.h"
#include "provisioner/vm/pci_device.h"

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

struct Gpu {
    std::string address;
    std::string pcie_switch;        // nearest switch's upstream port; "" when on a root port
    std::vector<std::string> nics;  // NIC PFs under that switch
};

struct Nic {
    std::string address;  // the PF (or a NIC without SR-IOV)
    std::string pcie_switch;
    std::vector<std::string> vfs;   // its VFs' addresses
    std::vector<std::string> gpus;  // GPUs it pairs with
};

struct HostTopology {
    std::string root;                  // the sysfs root read
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
