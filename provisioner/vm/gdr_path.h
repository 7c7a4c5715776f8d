// Whether a GPU and its NIC can do GPUDirect RDMA peer to peer, judged from
// what the host shows: they must share a PCIe switch (PIX/PXB; otherwise
// P2P crosses the CPU's root complex), no switch downstream port between
// them may redirect P2P requests or completions upstream (ACS), the NIC
// must have ATS enabled (a VM's P2P uses translated addresses), and each
// link should run at the width it can. `kiln host inspect` prints one
// verdict per GPU-NIC pair with its reasons.
#pragma once

#include <string>
#include <vector>

#include "provisioner/vm/host_topology.h"

namespace kiln::vm {

enum class GdrReady { yes, no, unknown };
const char* gdr_ready_name(GdrReady r);  // "yes", "no", "unknown"

struct GdrPath {
    std::string gpu;
    std::string nic;  // the PF
    PciRelation relation = PciRelation::sys;
    std::vector<std::string> ports;  // switch downstream ports between them
    GdrReady ready = GdrReady::unknown;
    std::vector<std::string> reasons;  // why not (or what is unknown); empty when ready
};

GdrPath gdr_path(const HostTopology& host, const std::string& gpu, const std::string& nic);

// Every GPU with each NIC it pairs with, in host order.
std::vector<GdrPath> gdr_paths(const HostTopology& host);

// "GDR path ready: no, because ACS redirects P2P at 0000:04:00.0 (ACSCtl 0x001d); ..."
std::string describe(const GdrPath& path);

}  // namespace kiln::vm
