// VM placement: how one host's GPUs, NICs, CPUs and memory split into VMs.
//   whole  one VM with every GPU, their paired NICs and the NVSwitches, and
//          a guest NUMA cell per host node
//   numa   one VM per NUMA node that has GPUs, with that node's GPUs, their
//          paired NICs, CPUs and memory
//   count  N CPU-only VMs on a host without GPUs (rehearsal, CI, CPU nodes):
//          each with the request's vcpus and memory from the first node that
//          has CPUs; their vCPUs share that node's CPUs (overcommitted when
//          N x vcpus exceeds them), their memory is checked in total
// Every VM with GPUs gets the fabric NICs (those with an RDMA device) of its
// nodes: a NIC with VFs as one VF (the PF stays with the host), one without
// whole; no function is given twice. Paired NICs go beside their GPUs
// (host_topology.h); the node's other fabric NICs (on root ports) get ports
// of their own. A GPU's companion functions in its IOMMU group (audio, USB)
// go with it. With ACS off above a GPU (one IOMMU group per top-level
// switch, as HGX boards have with ACS disabled in the BIOS), the fabric NIC
// functions of its group go with it too: the PFs whole and every VF, so the
// group is the VM's alone. Devices that are none of these stay with the host
// (the management NIC, disks).
//
// Refused: an IOMMU group split across VMs or between a VM and the host, a
// group holding a device that is not a GPU, NIC, NVSwitch or bridge, a
// device with no IOMMU group, and more memory, hugepages or CPUs than the
// node has free. The error names the devices, group and node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/stage/vm_config.h"

namespace kiln::vm {

enum class Split { whole, numa, count };
const char* split_name(Split split);

struct PlacementRequest {
    Split split = Split::whole;
    int count = 1;       // VMs, for Split::count
    int vcpus = 0;       // per VM; 0: every CPU of the VM's nodes
    int memory_gib = 0;  // per VM; 0: every free hugepage (or free GiB) of its nodes
    bool hugepages = true;
    uint64_t hugepage_kib = kHugePage1G;  // 1G or 2M
};

// From a fleet [vm.<name>] shape; "split" must be whole, numa or count.
Result<PlacementRequest> request_from_shape(const VmShape& shape);

// The GPUs of one host PCIe switch and the NIC functions given with them:
// the guest gets one emulated switch per slot so it sees each GPU beside
// its NIC as on the host.
struct SwitchSlot {
    std::string host_switch;  // upstream port; "" for devices on root ports
    std::vector<std::string> gpus;
    std::vector<std::string> nics;        // VF or PF addresses
    std::vector<std::string> companions;  // the GPUs' audio/USB functions, passed beside them
};

// One guest NUMA cell, backed by one host node.
struct VmCell {
    int host_node = 0;
    std::vector<int> cpus;  // host CPUs to pin the cell's vCPUs to, in order
    uint64_t memory_kib = 0;
    uint64_t hugepages = 0;  // pages of the request's size; 0 without hugepages
    std::vector<SwitchSlot> slots;
    std::vector<std::string> nvswitches;
};

struct VmPlacement {
    std::string name;  // "whole", "numa0", "numa1", ..., "part0", "part1", ...
    std::vector<VmCell> cells;

    size_t vcpus() const;
    uint64_t memory_kib() const;
    std::vector<std::string> gpus() const;
    // Every PCI function the VM gets, sorted.
    std::vector<std::string> devices() const;
};

struct Placement {
    PlacementRequest request;
    std::vector<VmPlacement> vms;
    std::vector<std::string> notes;  // choices worth telling the user

    const VmPlacement* vm(const std::string& name) const;
};

Result<Placement> place(const HostTopology& host, const PlacementRequest& request);

nlohmann::json to_json(const Placement& placement);

}  // namespace kiln::vm
