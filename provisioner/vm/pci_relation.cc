#include "provisioner/vm/pci_relation.h"

#include "provisioner/vm/host_topology.h"

namespace kiln::vm {

namespace {

// Bridges both chains start with; 0 under different host bridges.
size_t common_prefix(const PciDevice& a, const PciDevice& b) {
    if (a.host_bridge != b.host_bridge) return 0;
    size_t k = 0;
    while (k < a.bridges.size() && k < b.bridges.size() && a.bridges[k] == b.bridges[k]) ++k;
    return k;
}

}  // namespace

const char* relation_name(PciRelation r) {
    switch (r) {
        case PciRelation::pix:
            return "PIX";
        case PciRelation::pxb:
            return "PXB";
        case PciRelation::phb:
            return "PHB";
        case PciRelation::node:
            return "NODE";
        case PciRelation::sys:
            return "SYS";
    }
    return "SYS";
}

int shared_switch_depth(const PciDevice& a, const PciDevice& b) {
    const size_t k = common_prefix(a, b);
    // Upstream ports sit at odd positions (root port, up, down, up, ...).
    for (size_t i = k; i-- > 0;) {
        if (i % 2 == 1) return static_cast<int>(i);
    }
    return -1;
}

std::string shared_switch(const PciDevice& a, const PciDevice& b) {
    const int d = shared_switch_depth(a, b);
    return d < 0 ? "" : a.bridges[static_cast<size_t>(d)];
}

PciRelation pci_relation(const HostTopology& host, const PciDevice& a, const PciDevice& b) {
    const size_t k = common_prefix(a, b);
    if (k > 0) {
        // Below the last shared bridge each side crosses at most its
        // downstream port: one switch between them. Anything deeper is a
        // second switch.
        return a.bridges.size() <= k + 1 && b.bridges.size() <= k + 1 ? PciRelation::pix : PciRelation::pxb;
    }
    if (!a.host_bridge.empty() && a.host_bridge == b.host_bridge) return PciRelation::phb;
    const int na = host.node_of(a);
    return na >= 0 && na == host.node_of(b) ? PciRelation::node : PciRelation::sys;
}

}  // namespace kiln::vm
