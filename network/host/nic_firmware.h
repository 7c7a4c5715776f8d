// ConnectX firmware settings through `mlxconfig` (mstflint or MFT): read,
// set, and proven after the one host reboot they need.
//
// Firmware settings (SRIOV_EN, NUM_OF_VFS, ATS_ENABLED, and for RoCE
// ROCE_CC_PRIO_MASK_Pn, CNP_DSCP_Pn, CNP_802P_PRIO_Pn) are stored in the
// NIC's flash and take effect at the next boot. `mlxconfig -e -d PCI query
// KEYS` prints, per key, the default, the current (running) and the next-boot
// value; an older tool without `-e` columns prints the next-boot value only.
//
//   needs_set      next boot != wanted: `mlxconfig -d PCI -y set K=V ...`
//   needs_reboot   current != wanted (or set now): the host must reboot
//
// apply_nic_firmware() sets every NIC that differs (argv, never a shell),
// then reboots the host once for all of them (host_reboot.h), then queries
// every NIC again: after the reboot the current value must equal the wanted
// one, or the call fails naming NIC, key, wanted and read.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "network/host/host_nic.h"
#include "network/host/host_reboot.h"
#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::network::host {

struct FirmwareSetting {
    std::string key;        // "SRIOV_EN"
    std::string wanted;     // as mlxconfig's number: "1", "8"
    bool optional = false;  // the RoCE keys: a firmware without them is left alone
};

// The NIC port a PF drives, from its PCI function: "0000:3b:00.1" -> 2; 1
// when unknown. Only a guess: nic_port() asks the netdev first.
int firmware_port(const std::string& pci);

// The physical port (1-based, as mlxconfig's _Pn keys count) a netdev
// drives, from sysfs: `phys_port_name` "p0" -> 1, "p1" -> 2 (what mlx5 gives
// each PF's uplink, and what names like ens1f1np1 end with); else `dev_port`
// N > 0 -> N + 1 (several ports on one function); else the PCI function
// (firmware_port). A Socket Direct or multi-host card has several functions
// on one port, so function .1 is not always port 2.
int nic_port(CommandRunner& runner, const std::string& sysfs, const std::string& ifname, const std::string& pci,
             std::chrono::milliseconds timeout);

// The keys and values a FirmwareWanted asks for, in a fixed order; the
// RoCE keys for the NIC's port ("CNP_DSCP_P2" for port 2).
std::vector<FirmwareSetting> firmware_settings(const FirmwareWanted& f, int port = 1);

// "0" / "1" of a boolean key (SRIOV_EN, ATS_ENABLED) as mlxconfig names
// them, "False" / "True"; other keys' values as they are; "" as "?".
std::string firmware_value_text(const std::string& key, const std::string& value);

struct FirmwareValue {
    std::string current;    // "" when the tool printed no Current column
    std::string next_boot;  // what the NIC takes at the next boot
    // The value the NIC runs with: current when known, else next boot.
    const std::string& running() const { return current.empty() ? next_boot : current; }
};

// The keys found in `mlxconfig [-e] query` output, values as numbers
// ("True(1)" -> "1"). Keys the output lacks are absent.
std::map<std::string, FirmwareValue> parse_mlxconfig_query(const std::string& out,
                                                           const std::vector<std::string>& keys);

// The PCI address of a netdev ("0000:3b:00.0") from its sysfs device link;
// an error "network.not_pci" when it has none (veth, bond).
Result<std::string> nic_pci_address(CommandRunner& runner, const std::string& sysfs, const std::string& ifname,
                                    std::chrono::milliseconds timeout);

// Queries the settings' keys on one NIC: `mlxconfig -e -d PCI query` lists
// every key the device has, so a key it lacks is absent from the result
// (naming it would fail the whole query). Errors: "network.mlxconfig_missing" (the
// message says to install mstflint), "network.mlxconfig_failed".
Result<std::map<std::string, FirmwareValue>> query_nic_firmware(CommandRunner& runner, const std::string& pci,
                                                                const std::vector<FirmwareSetting>& settings,
                                                                std::chrono::milliseconds timeout);

struct FirmwareNic {
    std::string nic;     // the fleet's name, "mlx5_0"
    std::string ifname;  // its netdev on the host
    FirmwareWanted want;
};

struct FirmwareApplyOptions {
    std::string sysfs = "/sys";
    std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};
    RebootOptions reboot;  // the wait for the host, its progress and stop hooks
};

struct FirmwareApplyReport {
    std::vector<std::string> set;  // per NIC set: "mlx5_0 SRIOV_EN False->True, NUM_OF_VFS 0->8"
    bool rebooted = false;
};

// Sets, reboots once when anything needs it, verifies. Errors (domain
// "network"): those of query_nic_firmware and reboot_and_wait,
// "network.mlxconfig_set_failed", "network.firmware_not_applied" (after the reboot a value
// is not the wanted one: "mlx5_0 ATS_ENABLED wanted 1, read 0").
Result<FirmwareApplyReport> apply_nic_firmware(CommandRunner& runner, const std::vector<FirmwareNic>& nics,
                                               const FirmwareApplyOptions& options);

}  // namespace kiln::network::host
