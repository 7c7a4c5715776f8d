// The NCCL topology file (NCCL_TOPO_FILE) for one VM, written from the same
// model as its domain XML: one <cpu> per guest NUMA cell with the guest
// vCPUs' affinity mask, under it one <pci> per emulated switch (the guest
// address of its upstream port, with the host switch's link speed and
// width) holding the GPUs and NIC functions at their guest addresses with
// the host devices' ids, class and link; NVSwitches under their cell.
//
// Guest bus ids come from guest_pci_layout.h. Like the topology files
// Azure and AWS ship for their VMs, it leaves <gpu> and <nic>/<net> for
// NCCL to fill from the running guest: their names (mlx5_N) and ranks are
// the guest's, not the host's.
#pragma once

#include <string>

#include "provisioner/core/result.h"
#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/placement.h"

namespace kiln::vm {

Result<std::string> nccl_topology(const HostTopology& host, const VmPlacement& vm);

// The <cpu affinity=...> mask of CPUs [first, first+count) among `total`:
// 32-bit hex words, most significant first, as NCCL writes it.
std::string affinity_mask(int first, int count, int total);

}  // namespace kiln::vm
