// What kiln manages on one node's host: each fleet NIC with the settings the
// node's RoCE profile asks of it, observed or applied through the host NIC
// applier (host_nic.h), and the result as JSON for the network stage's
// observation and `kiln network drift`. The policy (docs/network.md):
//   drift, failed   work: the stage plans "host-nics:<node>"; apply sets them
//   unsupported     a warning (plan output, observation, journal); not work
//   needs-reboot    a warning carrying the mlxconfig plan; never an action,
//                   so a re-run does not plan again because of it
//   either of the last two on a setting the host's `require` lists: the
//   plan fails, naming node, NIC and setting.
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
// scope, in order. Errors name the node and the NIC ("no-such-nic", ...).
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
    std::vector<std::string> blocking;  // required settings unsupported or needing a reboot
    std::vector<std::string> warnings;  // per NIC, the unsupported and needs-reboot items
};
HostNicFindings host_nic_findings(const nlohmann::json& host_nics);

// Drift and failed items as entries for `kiln network drift --json`:
// {"node", "nic", "ifname", "setting", "running", "desired", "outcome", "detail", "text"}.
nlohmann::json host_drift_entries(const std::string& node, const nlohmann::json& host_nics);

}  // namespace kiln::network::host
