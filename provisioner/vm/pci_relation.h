// How two PCI functions reach each other, in the words `nvidia-smi topo -m`
// and NCCL use, from their bridge chains alone:
//   PIX  through at most one PCIe switch (both hang off its downstream ports)
//   PXB  through several switches, without the host bridge
//   PHB  through one host bridge (different root ports of it)
//   NODE through the interconnect between host bridges of one NUMA node
//   SYS  across NUMA nodes (or a node unknown)
// GPUDirect RDMA works best over PIX and PXB; pairing prefers them.
#pragma once

#include <string>

#include "provisioner/vm/pci_device.h"

namespace kiln::vm {

struct HostTopology;

enum class PciRelation { pix, pxb, phb, node, sys };

// "PIX", "PXB", "PHB", "NODE", "SYS".
const char* relation_name(PciRelation r);

PciRelation pci_relation(const HostTopology& host, const PciDevice& a, const PciDevice& b);

// The deepest switch (its upstream port) above both; "" when none is.
std::string shared_switch(const PciDevice& a, const PciDevice& b);

// How deep that switch sits: its index in the bridge chains, -1 for none.
int shared_switch_depth(const PciDevice& a, const PciDevice& b);

}  // namespace kiln::vm
