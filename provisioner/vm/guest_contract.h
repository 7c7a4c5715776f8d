// What the vm, image and smoke stages agree on about a guest, in one place:
// how domains are named, how a guest says it is ready, and how the smoke
// job's ranks in different VMs reach each other.
#pragma once

#include <string>

namespace kiln::vm {

// libvirt domain name of a node's VM `index` (0-based): "kiln-<node>-vm<index>".
// Reimage keeps the name (the same domain identity, a new disk).
inline std::string domain_name(const std::string& node, int index) {
    return "kiln-" + node + "-vm" + std::to_string(index);
}

// The guest writes one line to its first serial port (ttyS0) once
// cloud-init has finished: the marker, a space, then a JSON object on the
// same line, e.g.
//   KILN_READY {"cloud_init":"done","smoke":"/usr/local/bin/kiln-smoke","modules":["virtio_net",...]}
// The image's boot check and the vm stage's readiness wait both read it.
inline constexpr const char* kReadyMarker = "KILN_READY";

// Where kiln-smoke is installed in every guest image.
inline constexpr const char* kGuestSmokePath = "/usr/local/bin/kiln-smoke";

// The VM's smoke config, written by the vm stage's cloud-init seed: the
// ring's peers, and "gpus", how many GPUs the VM was given (kiln-smoke
// fails when it finds fewer).
inline constexpr const char* kGuestSmokeConfigPath = "/etc/kiln/smoke.json";

// The guest's readiness marker line is also written here (a tmpfs, so a
// boot clears it as a start clears the serial log): on a remote hypervisor,
// whose serial log kiln cannot read, kiln reads it through the guest agent.
inline constexpr const char* kReadyFile = "/run/kiln-ready";

// Guests use QEMU user networking (no bridge, no host routes): the host is
// 10.0.2.2 from inside. For the smoke job's rank-to-rank TCP, each VM gets a
// host port forward 127.0.0.1:<port> -> guest:kGuestSmokePort; ranks in other
// VMs dial 10.0.2.2:<port>. Ports are smoke_host_port_base + a fleet-wide VM
// ordinal (node order in the fleet, then VM index).
inline constexpr int kGuestSmokePort = 29500;
inline constexpr int kSmokeHostPortBase = 29600;

// The smoke job's RDMA checks (VMs whose shape sets rdma_checks): perftest's
// connection setup goes through a second forward, 127.0.0.1:<port> ->
// guest:kGuestRdmaPort (perftest's own default port), ports from
// kRdmaHostPortBase + the same ordinal. The RDMA traffic itself goes over
// the VM's fabric NICs.
inline constexpr int kGuestRdmaPort = 18515;
inline constexpr int kRdmaHostPortBase = 39600;

}  // namespace kiln::vm
