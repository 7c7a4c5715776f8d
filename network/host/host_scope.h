// What kiln manages on one node's host: each fleet NIC with the settings the
// node's RoCE profile asks of it, observed or applied through the host NIC
// applier (host_nic.h), and the result as JSON for the network stage's
// observation and `kiln network drift`. The policy (docs/network.md):
//   drift, failed   work: the stage plans "host-nics:<node>"; apply sets them
//   needs-reboot    ConnectX firmware differs: the stage plans
//                   "host-firmware:<node>" (mlxconfig set, one host reboot,
//                   verified; nic_firmware.h)
//   unsupported     a warning (plan output, observation, journal); not work;
//                   on a setting the host's `require` lists (mlxconfig
//                   missing with require = ["firmware"]): the plan fails,
//                   naming node, NIC and setting.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/host/host_nic.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::network::host {

struct HostNicTarget {
    std::string nic;  // the fleet's name, "mlx5_0"
    NicDesired want;  // want.ifname is the netdev on the host
};

struct HostScope {
    bool managed = false;
    std::string why_not;  // when not managed: said in the observation
    std::vector<HostNicTarget> nics;
};

// Managed when the node has a `host` and a network profile.
HostScope host_scope_for_node(const config::Fleet& fleet, const config::Node& node);

// The `require` name of an item's setting: "sriov_numvfs" -> "sriov",
// "ecn roce_np prio 3" -> "ecn", "firmware ATS_ENABLED" -> "firmware".
std::string setting_group(const std::string& setting);

struct NicResult {
    std::string nic;
    NicReport report;
};

// Probes the host, then observes (change = false) or applies every NIC of the
// scope, in order. Errors name the node and the NIC ("network.no_such_nic", ...).
Result<std::vector<NicResult>> reconcile_host_nics(CommandRunner& runner, const config::Node& node,
                                                   const HostScope& scope, bool change);

// {"managed": true, "host": "netns x", "nics": [{"nic", "ifname", "items":
// [{"setting", "desired", "observed", "outcome", "detail", "required"}]}],
// "counts": {"ok": n, "drift": n, ...}}
nlohmann::json host_nics_json(const config::Node& node, const std::vector<NicResult>& results);
// {"managed": false, "why": ...}
nlohmann::json host_not_managed_json(const std::string& why);

// What an observation (host_nics_json) means, as lines for people.
struct HostNicFindings {
    std::vector<std::string> work;      // drift and failed items: "mlx5_0 (rdma0) mtu: 1500 -> 9000 (drift)"
    std::vector<std::string> blocking;  // required settings unsupported
    std::vector<std::string> warnings;  // per NIC, the unsupported items
    std::vector<std::string>
        firmware;  // per NIC, the needs-reboot items: "mlx5_0 SRIOV_EN False->True, NUM_OF_VFS 0->8"
    std::vector<std::string>
        firmware_plans;  // per NIC as `firmware`: "mlxconfig -d PCI -y set ..., then one host reboot"
    // Required needs-reboot items: blocking where kiln cannot reboot the host (not SSH).
    std::vector<std::string> firmware_blocking;
};
HostNicFindings host_nic_findings(const nlohmann::json& host_nics);

// Drift, failed and needs-reboot items as entries for `kiln network drift --json`:
// {"node", "nic", "ifname", "setting", "running", "desired", "outcome", "detail", "text"}.
nlohmann::json host_drift_entries(const std::string& node, const nlohmann::json& host_nics);

}  // namespace kiln::network::host
