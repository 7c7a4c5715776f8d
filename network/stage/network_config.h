// [network.NAME]: the RoCE profile, the table the network stage owns, read
// by its module rather than the core loader (config_table.h). A node picks
// its profile with `network = "NAME"`; the switch renderers and the host
// NIC settings all read the one profile.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::network {

struct RoceProfile {
    std::string name;
    int lossless_priority = 3;
    int roce_dscp = 26;
    int cnp_dscp = 48;
    int cnp_priority = 6;
    int ecn_min_kb = 150;
    int ecn_max_kb = 1500;
    int ecn_probability_pct = 10;
    std::string pfc_watchdog_action = "drop";  // drop | forward | alert
    int pfc_watchdog_detection_ms = 200;
    int pfc_watchdog_restoration_ms = 400;
    // SONiC's PFC_WD|GLOBAL POLL_INTERVAL, which kiln writes: detection and
    // restoration must be at least this (SONiC's YANG refuses the patch
    // otherwise). 200 is SONiC's own default.
    int pfc_watchdog_poll_ms = 200;
    int host_mtu = 9000;
    int switch_mtu = 9216;
    std::string buffer_policy = "lossless";  // lossless | default
    // Priorities with PFC: the reader accepts only lossless_priority (PFC on
    // a priority no RoCE traffic uses pauses the link for nothing).
    std::vector<int> pfc_priorities{3};
    // The keys the fleet file wrote ("ecn_probability_pct",
    // "pfc_watchdog.detection_ms"); the rest hold kiln's defaults above. A
    // renderer whose platform has its own defaults keeps those for keys not
    // written here (NVUE's RoCE mode: ECN thresholds and probability).
    std::set<std::string> given;
    bool is_given(const std::string& key) const { return given.count(key) != 0; }
    config::SourcePos pos;
};

// The table's key, which is also the node key that picks a profile.
inline constexpr const char* kNetworkTable = "network";

// The table's key, reader and node key, for the stage registry.
config::ConfigTable network_table();

// What the fleet defines, and what this node picks (nullptr: none).
const config::Profiles<RoceProfile>* network_profiles(const config::Fleet& fleet);
const RoceProfile* network_profile(const config::Fleet& fleet, const config::Node& node);
// The profile named `name` (nullptr: none).
const RoceProfile* find_network_profile(const config::Fleet& fleet, const std::string& name);
// Adds a profile, for a fleet built in code (tests, benchmarks).
void add_network_profile(config::Fleet& fleet, RoceProfile profile);
// The profile `name`, to change it (tests); nullptr: none.
RoceProfile* mutable_network_profile(config::Fleet& fleet, const std::string& name);

}  // namespace kiln::network
