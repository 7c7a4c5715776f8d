// PCIe links that trained below what they can do, on the paths of the
// devices a node's VMs are given. A GPU or NIC on an x8 link where its slot
// and card do x16 (a bent pin, a riser half seated, a retimer fault) still
// enumerates and passes every functional check, at half its bandwidth: the
// smoke job would blame the ring, not the slot.
//
// Width is compared on every link of the path (the device's own, and each
// bridge's above it up to the root port). Speed is compared on every link
// except a GPU's or NVSwitch's own (and its other functions'): an idle GPU
// trains down to 2.5 GT/s and back up under load
// (tests/fixtures/sysfs/README.md), so its speed means something only
// under load. A VF has no link of its own (Linux
// reads "Unknown" and 0): its PF's path is checked. A link the kernel does
// not report is listed as unread, never as healthy.
#pragma once

#include <string>
#include <vector>

#include "provisioner/vm/host_topology.h"

namespace kiln::vm {

struct PcieLinkCheck {
    size_t links = 0;                 // distinct functions whose link was compared
    std::vector<std::string> faults;  // "nic 0000:4f:00.0 (15b3:101d): x8 of x16"
    std::vector<std::string> unread;  // functions with no link reported
};

// The links on the paths of `addresses` (devices of the host, as placement
// names them), each function once.
PcieLinkCheck check_pcie_links(const HostTopology& host, const std::vector<std::string>& addresses);

// "16.0 GT/s PCIe" -> 16.0; 0 when unreadable ("Unknown", "").
double pcie_gts(const std::string& speed);

}  // namespace kiln::vm
