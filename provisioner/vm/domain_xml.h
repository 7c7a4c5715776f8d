// libvirt domain XML for one VM of a placement (DESIGN §3 vm): the guest
// sees the host's topology. q35; the host CPU model; memory on hugepages
// bound to the host nodes; vCPUs pinned and grouped into guest NUMA cells
// mirroring the host nodes; one pcie-expander-bus per cell carrying that
// cell's <node>; under it one emulated PCIe switch (root port, upstream
// port, a downstream port per device) per host switch, so every GPU sits
// beside the NIC it pairs with on the host; hostdev managed='yes' for each
// GPU, NIC function and NVSwitch; an intel vIOMMU with caching mode and
// device IOTLB where GPUs and NICs share a switch (GPUDirect RDMA uses ATS
// there); serial console logged to a file; the guest agent channel; the
// overlay disk and the cloud-init seed; user networking per
// guest_contract.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/core/result.h"
#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/placement.h"

namespace kiln::vm {

enum class Accelerator { kvm, tcg };
// "kvm" / "tcg" for people; libvirt's domain type is "kvm" / "qemu".
const char* accelerator_name(Accelerator a);
const char* domain_type(Accelerator a);

// How the guest reaches the host and the smoke ranks of other VMs.
//   slirp  QEMU user networking on the QEMU command line with a hostfwd
//          (the host is 10.0.2.2 inside, as guest_contract.h promises)
//   passt  libvirt's <interface type='user'> with <backend type='passt'/>
//          and <portForward>; the guest sees the host's addresses instead
//   none   no NIC (probe guests)
enum class NetBackend { none, slirp, passt };
const char* net_backend_name(NetBackend n);

enum class Viommu { automatic, on, off };

// Direct kernel boot, for the accelerator probe and the cheap test guest.
struct DirectBoot {
    std::string kernel;
    std::string initrd;
    std::string cmdline;
};

struct DomainOptions {
    std::string name;  // guest_contract.h domain_name()
    std::string uuid;  // "" = derived from the name, so a redefine keeps it
    Accelerator accelerator = Accelerator::tcg;
    std::string cpu_mode;  // "" = host-passthrough (KVM) or maximum (TCG, which cannot pass the host CPU)
    bool hugepages = true;
    uint64_t hugepage_kib = kHugePage1G;
    bool pin = true;  // vcpupin, emulatorpin and numatune to the cells' host CPUs and nodes
    Viommu viommu = Viommu::automatic;
    std::string disk;      // the overlay qcow2; "" = none
    std::string seed_iso;  // the cloud-init NoCloud seed; "" = none
    std::optional<DirectBoot> direct_boot;
    std::string serial_log;  // where the serial console is logged (the readiness marker appears here)
    bool guest_agent = true;
    NetBackend net = NetBackend::slirp;
    int smoke_host_port = 0;  // 127.0.0.1:<port> -> guest kGuestSmokePort; 0 = no forward
    int rdma_host_port = 0;   // 127.0.0.1:<port> -> guest kGuestRdmaPort; 0 = no forward
    // Rehearsal: one emulated fabric NIC (virtio-net) on this host bridge,
    // with this MAC; "" = none. The lite guest runs Soft-RoCE over it.
    std::string fabric_bridge;
    std::string fabric_mac;
    // Stamped into <metadata> so observe can tell whether the defined
    // domain is the one wanted; "" = no metadata.
    std::string desired_hash;
    // base_image_identity() of the disk's base when the overlay was made;
    // stamped beside the hash.
    std::string base_identity;
};

inline constexpr const char* kKilnXmlns = "urn:kiln:vm:1";

// The desired_hash stamped in a domain's XML ("" when there is none).
std::string stamped_hash(const std::string& domain_xml);
// The base image identity stamped in a domain's XML ("" when there is none).
std::string stamped_base(const std::string& domain_xml);

// Options for a VM of `placement`: hugepages from its request.
DomainOptions domain_options(const Placement& placement, const std::string& name);

// The domain XML. Fails (domain "vm", code "domain") when the VM cannot be
// described: no cells, a cell on a node the host lacks, hugepages asked
// with none placed, a passed device the host does not have.
Result<std::string> domain_xml(const HostTopology& host, const VmPlacement& vm, const DomainOptions& options);

// A stable RFC 4122 (version 4 layout) UUID derived from a name.
std::string uuid_from_name(const std::string& name);

// A stable MAC in QEMU's locally administered range 52:54:00, derived from
// a name (the VM's fabric NIC keeps its address, and so its RDMA GID,
// across a redefine).
std::string mac_from_name(const std::string& name);

// Whether this VM gets a vIOMMU under `mode`.
bool wants_viommu(const VmPlacement& vm, Viommu mode);

}  // namespace kiln::vm
