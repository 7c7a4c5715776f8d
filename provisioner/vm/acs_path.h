// ACS P2P redirect off on the GPUDirect paths, and only there.
//
// With ACS P2P Request Redirect (RR) and Completion Redirect (CR) on, a
// switch downstream port sends a GPU's peer-to-peer request for its NIC up
// to the root complex (and the IOMMU) instead of across the switch: GPUDirect
// RDMA then crawls or fails. kiln clears those two bits on exactly the
// downstream ports between each paired GPU and NIC of the VMs (gdr_path.h's
// `ports`), and leaves every other bit as it is: Source Validation (SV)
// stays on, so a device behind the port still cannot spoof a requester id,
// and every port off those paths keeps its isolation. The IOMMU groups the
// kernel formed at boot do not change.
//
// Facts (PCIe base spec, as Linux's include/uapi/linux/pci_regs.h names
// them): the ACS extended capability has ID 0x000d; its ACS Control register
// is the 16 bits at +6; SV 0x0001, TB 0x0002, RR 0x0004, CR 0x0008, UF
// 0x0010, EC 0x0020, DT 0x0040. `setpci` names the register ECAP_ACS+6.w.
//
// Through `setpci` on the host (argv, never a shell):
//   read   setpci -s PORT ECAP_ACS+6.w             -> "001d"
//   write  setpci -s PORT ECAP_ACS+6.w=0000:000c   (value:mask: only RR and CR
//          change, read-modify-write by setpci)
// then read back: a port whose RR or CR is still set fails the call with
// "vm.acs_not_applied", naming port, wanted and read.
//
// ACS control is runtime state: every boot (the firmware's, or kiln's own
// reboot for ConnectX firmware) puts the firmware's value back. The vm stage
// reads the ports at every observe, so a reboot shows as work
// ("host-acs:<node>", planned before any VM is defined or started) and is
// set again before the VMs start.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"
#include "provisioner/vm/host_topology.h"

namespace kiln::vm {

// The bits kiln clears; the rest of ACS Control stays as read.
inline constexpr uint16_t kAcsP2pRedirect = kAcsP2pReqRedirect | kAcsP2pCmpltRedirect;

inline constexpr uint16_t acs_wanted(uint16_t ctrl) {
    return static_cast<uint16_t>(ctrl & ~kAcsP2pRedirect);
}

// One downstream port on GPUDirect paths, with the pairs it serves
// ("0000:07:00.0 <-> 0000:0b:00.0").
struct AcsPort {
    std::string port;
    std::vector<std::string> pairs;
};

// The switch downstream ports between each of `gpus` and the NICs it pairs
// with (PIX/PXB only: a path through the root complex has none), each once,
// in address order. A port whose config space was read in full and has no
// ACS capability cannot redirect and is left out.
std::vector<AcsPort> acs_path_ports(const HostTopology& host, const std::vector<std::string>& gpus);

struct AcsChange {
    std::string port;
    uint16_t from = 0;
    uint16_t to = 0;
    std::string text() const;  // "0000:04:00.0 ACSCtl 0x001d -> 0x0011"
};

// ACS Control of one port. Errors (domain "vm"): "vm.setpci_missing",
// "vm.acs_unreadable" (setpci failed: no such device, no ACS capability, not
// root, timed out; its first line said).
Result<uint16_t> read_acs_ctrl(CommandRunner& runner, const std::string& port, std::chrono::milliseconds timeout);

// Reads every port: the changes that would clear P2P redirect. Empty when converged.
Result<std::vector<AcsChange>> plan_acs(CommandRunner& runner, const std::vector<AcsPort>& ports,
                                        std::chrono::milliseconds timeout);

// Reads, writes what differs, reads back. Errors: those of read_acs_ctrl,
// "vm.acs_write_failed" (setpci refused the write), "vm.acs_not_applied" (the read
// back still redirects: "0000:04:00.0 ACSCtl wanted 0x0011, read 0x001d").
// Ports before the failing one stay written: each write is whole on its own,
// and a run again plans only what is left.
Result<std::vector<AcsChange>> apply_acs(CommandRunner& runner, const std::vector<AcsPort>& ports,
                                         std::chrono::milliseconds timeout);

// The argv that clears P2P redirect on one port (for plans and docs).
std::vector<std::string> acs_write_argv(const std::string& port);

}  // namespace kiln::vm
