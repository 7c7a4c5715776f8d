// What kiln manages on one switch: the ports cabled to nodes or to other
// switches (all of them, or one node's share), the RoCE profile they carry,
// and the comparison of the rendered config with what the switch runs.
// Shared by the network stage (one node's ports and its leaves' uplinks) and
// `kiln network drift` (every cabled port).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/fabric.h"
#include "network/stage/network_config.h"
#include "network/switch_driver.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"

namespace kiln::network {

struct SwitchScope {
    const config::Switch* sw = nullptr;
    const network::RoceProfile* profile = nullptr;
    std::vector<Port> ports;  // cabled ports (to nodes or switches), in the switch's order
};

// The profile of fabric.switches[i]; profile_for_switch by default. A plan
// passes one that computes each switch's once.
using SwitchProfileFn = std::function<Result<const network::RoceProfile*>(size_t switch_index)>;

// The switches a node's traffic crosses, in fabric order, each with its
// network profile: every switch `node` is cabled to (its leaves) with the
// node's own ports and the leaf's uplink ports, every switch those
// uplinks reach (spines) with the ports facing them, and above the spines
// every core link (no node at either end: spine to super-spine) at both
// ends, up to the top. Lossless holds end to end only if both ends of each
// link carry the profile. Empty when the node names no network profile.
// Cost: the node's own ports, its leaves' uplinks and the core links above
// (the fabric's index), plus `profile`.
Result<std::vector<SwitchScope>> scopes_for_node(const config::Fleet& fleet, const Fabric& fabric,
                                                 const config::Node& node, const SwitchProfileFn& profile = {});

// Whether `node` has a network scope: false when it names no network
// profile, an error when it names one the fleet does not declare.
Result<bool> node_has_scope(const config::Fleet& fleet, const config::Node& node);

// A switch of a scope by fabric index, with port indexes into its ports (ascending).
struct ScopePorts {
    size_t sw = 0;
    std::vector<size_t> ports;
};

// The part of a node's scope its leaves decide (fabric indexes, ascending):
// every leaf (even without uplinks) with its uplink ports, the ports those
// face, and above the spines every core link at both ends; in fabric order.
// scopes_for_node adds the node's own ports to it; a plan computes it once
// per set of leaves, which all nodes of those leaves share.
Result<std::vector<ScopePorts>> scope_beyond_own_ports(const Fabric& fabric, const std::vector<size_t>& leaves);

// The fleet's switch behind fabric.switches[i] (build_fabric keeps fleet order).
const config::Switch* fleet_switch(const config::Fleet& fleet, const Fabric& fabric, size_t switch_index);

// One switch with every cabled port (to nodes and uplinks) and the profile
// its nodes share (profile_for_switch's rules). No cabled port: an empty scope.
Result<SwitchScope> scope_for_switch(const config::Fleet& fleet, const Fabric& fabric, const config::Switch& sw);

struct SwitchComparison {
    nlohmann::json desired;
    nlohmann::json running;
    std::vector<ConfigChange> changes;  // empty: converged
};

// render, read_running, diff.
Result<SwitchComparison> compare_switch(SwitchDriver& driver, const SwitchScope& scope);
// The same on a state read_state() returned before (no I/O).
Result<SwitchComparison> compare_switch(const SwitchDriver& driver, const SwitchScope& scope,
                                        const nlohmann::json& state);

// A change as JSON for plans and `drift --json`.
nlohmann::json change_json(const std::string& switch_name, const ConfigChange& c);

}  // namespace kiln::network
