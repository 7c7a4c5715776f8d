// [vm.NAME]: the table the vm stage owns, read by its module rather than
// the core loader (config_table.h). A node picks its VM shape with
// `vm = "NAME"`.
#pragma once

#include <string>
#include <vector>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::vm {

struct VmShape {
    std::string name;
    std::string split = "whole";  // whole | numa | count
    int count = 0;                // split = "count": that many CPU-only VMs (hosts without GPUs)
    int vcpus = 0;                // 0: all host CPUs of the VM's NUMA nodes
    int memory_gib = 0;           // 0: derived from the host
    bool hugepages = true;
    std::string hugepage_size = "1G";                         // 1G | 2M
    std::string accelerator = "auto";                         // auto (probe KVM, else TCG) | kvm | tcg
    std::string network = "slirp";                            // slirp | passt | none (guest_contract.h)
    std::string sysfs = "/sys";                               // host sysfs root; a recorded tree for rehearsal
    std::string images_dir;                                   // overlays, seeds, serial logs; "" = <fleet dir>/.kiln/vm
    std::string base_image;                                   // the cached guest image the overlays sit on
    config::Duration boot_timeout{std::chrono::minutes(10)};  // start to the readiness marker
    // Under TCG, how many VMs boot at once on one hypervisor (boot_gate.h).
    int tcg_parallel_boots = 1;
    std::vector<std::string> ssh_authorized_keys;  // for the guest user (cloud-init)
    // Rehearsal: each VM gets one emulated fabric NIC (virtio-net) on this
    // host bridge, over which the lite guest image runs Soft-RoCE; "" = none.
    std::string fabric_bridge;
    // The smoke job's RDMA checks (docs/smoke.md), which need a port forward
    // for perftest's connection setup: on by default with fabric_bridge; set
    // it for VMs given their fabric NICs by passthrough.
    bool rdma_checks = false;
    config::SourcePos pos;
};

// The table's key, which is also the node key that picks a shape.
inline constexpr const char* kVmTable = "vm";

// The table's key, reader and node key, for the stage registry.
config::ConfigTable vm_table();

// What the fleet defines, and what this node picks (nullptr: none).
const config::Profiles<VmShape>* vm_shapes(const config::Fleet& fleet);
const VmShape* vm_shape(const config::Fleet& fleet, const config::Node& node);
// Adds a shape, for a fleet built in code (tests, benchmarks).
void add_vm_shape(config::Fleet& fleet, VmShape shape);
// The shape `name`, to change it (tests, `kiln vm xml --sysfs`); nullptr: none.
VmShape* mutable_vm_shape(config::Fleet& fleet, const std::string& name);

}  // namespace kiln::vm
