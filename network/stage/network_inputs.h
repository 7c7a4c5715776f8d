// What the network stage's input hash covers for one node, stated by the
// stage itself: the node's rack and its switches, the RoCE profile, its
// cables with the far port's settings, its managed host's NICs, and the
// uplinks of its leaves (the stage configures both ends of those too).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"

namespace kiln::network {

// Canonical JSON; keys that older fleets never wrote appear only when set,
// so those fleets keep the hashes their journals hold.
nlohmann::json network_inputs(const config::Fleet& fleet, const config::Node& node);

// What network_inputs_text serialised for one fleet, to reuse: the pieces
// that many nodes' inputs share. Not thread-safe.
struct NetworkTextMemo {
    std::unordered_map<std::string, std::string> switches;  // a cable's far switch, by name
    std::unordered_map<std::string, std::string> racks;     // a rack's switches, by rack
    std::unordered_map<std::string, std::string> profiles;  // by network profile name
    std::vector<std::optional<std::string>> uplinks;        // by fleet.uplinks index
    size_t uplinks_serialised = 0;
};

// network_inputs(fleet, node).dump(), byte for byte, with the pieces nodes
// share (their leaves' uplinks, far switches, rack, profile) serialised once
// into `memo` and copied as text: a plan hashes every node's inputs, and
// each lists every uplink of its leaves.
std::string network_inputs_text(const config::Fleet& fleet, const config::Node& node, NetworkTextMemo& memo);

}  // namespace kiln::network
