// What a node's VMs should be, from the fleet config alone: discover the
// host (its shape's sysfs root), place the VMs, name them
// (guest_contract.h), give each its files, smoke port and seed, and render
// its domain XML and NCCL topology file. The vm stage and `kiln vm xml`
// both start here, so what one prints is what the other defines.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/vm/cloud_init_seed.h"
#include "provisioner/vm/domain_manager.h"
#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/placement.h"

namespace kiln::vm {

struct NodeVm {
    std::string name;  // libvirt domain name
    int index = 0;     // within the node
    int ordinal = 0;   // fleet-wide: node order, then index (guest_contract.h)
    int smoke_host_port = 0;
    VmFiles files;
    std::string nccl_topology;
    SeedConfig seed;
    DomainOptions options;     // everything but the accelerator, which apply resolves
    std::string desired_hash;  // over the domain XML (accelerator aside), the seed, the shape's accelerator and base
                               // image identity
};

struct NodeVms {
    const VmShape* shape = nullptr;
    std::string uri;  // libvirt URI ("" in the config = local)
    std::string dir;  // this node's VM files
    HostTopology host;
    Placement placement;
    std::vector<NodeVm> vms;

    // The domain XML of vms[i] for an accelerator, stamped with its hash.
    Result<std::string> xml(size_t i, Accelerator accel) const;
};

// Host discovery is cached per sysfs root: the ordinals of one node need
// the VM counts of every node before it.
class NodeVmPlanner {
public:
    // Errors name the shape's or node's FILE:LINE:COL and key.
    Result<NodeVms> plan(const config::Fleet& fleet, const config::Node& node);

    // Discovery of one sysfs root, cached.
    Result<HostTopology> host(const std::string& sysfs_root);

private:
    Result<Placement> place_node(const config::Fleet& fleet, const config::Node& node, const HostTopology& host);
    std::mutex mu_;
    std::map<std::string, HostTopology> hosts_;
};

// The host PCI functions the node's VM `vm` (its libvirt name) is given, as
// its plan places them: its GPUs, and its other functions (the NICs given
// with them, NVSwitches, companions). Fault localisation names them beside a
// VM it finds bad. Errors: the node's plan fails, or it has no such VM.
// `guest` gives each of them the address the VM's kernel sees it at (the
// guest PCIe tree the domain XML lays out), so that a device the guest
// names can be traced to the host function behind it.
struct VmHostDevices {
    std::vector<std::string> gpus;
    std::vector<std::string> others;
    std::map<std::string, std::string> guest;  // host address -> guest address
};
Result<VmHostDevices> vm_host_devices(NodeVmPlanner& planner, const config::Fleet& fleet, const config::Node& node,
                                      const std::string& vm);

// The node's VM folder: <images_dir or fleet dir/.kiln/vm>/<node>.
std::string node_vm_dir(const config::Fleet& fleet, const config::Node& node);

Result<Accelerator> parse_accelerator(const std::string& s);  // "kvm" | "tcg"
NetBackend parse_net_backend(const std::string& s);           // slirp | passt | none

}  // namespace kiln::vm
