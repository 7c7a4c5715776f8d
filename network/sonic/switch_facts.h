// What kiln learns from a SONiC switch, beside the tables it manages, before
// it renders for that switch: its buffer model, its SKU's headroom table, the
// names its templates gave shared objects. SonicDriver::read_running puts the
// raw material under the running config's "_kiln" key (a name CONFIG_DB
// tables never take, so diffs and patches never see it):
//   "_kiln": { "config_db": <the whole CONFIG_DB>,
//              "pg_lookup": <pg_profile_lookup.ini text> | null,
//              "pg_lookup_path": "/usr/share/sonic/device/<platform>/<hwsku>/pg_profile_lookup.ini",
//              "pg_lookup_error": "<why it could not be read>" }
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "network/sonic/pg_lookup.h"

namespace kiln::network::sonic {

inline constexpr const char* kFactsKey = "_kiln";

struct SonicFacts {
    // DEVICE_METADATA|localhost buffer_model: "traditional" (buffermgrd sizes
    // PGs from the SKU's table) or "dynamic" (it computes them from cable
    // length, speed and MTU).
    std::string buffer_model = "traditional";
    std::string platform;
    std::string hwsku;
    // BUFFER_POOL|ingress_lossless_pool mode ("dynamic" -> dynamic_th); empty
    // when the switch has no such pool.
    std::string pool_mode;
    // The CABLE_LENGTH entry the switch's template made ("AZURE"); empty when none.
    std::string cable_length_key;
    std::optional<PgLookup> pg_lookup;
    std::string pg_lookup_path;
    std::string pg_lookup_error;  // why pg_lookup is empty
    // The egress profiles the switch's template puts queues on: the lossless
    // one on its lossless queues ("3-4"), the lossy one on queue 0's range.
    // They differ by SKU (Mellanox: egress_lossless_profile and
    // q_lossy_profile; its egress_lossy_profile is the port-level one).
    // Read from the switch's BUFFER_QUEUE, else egress_lossless_profile and
    // egress_lossy_profile where those exist; empty: kiln writes no BUFFER_QUEUE.
    std::string queue_lossless_profile;
    std::string queue_lossy_profile;
    // Ports whose PORT_QOS_MAP names a pfc_to_pg_map (Mellanox SKUs do).
    std::set<std::string> pfc_to_pg_ports;
    // PORT|<name> lanes as the switch has them (create-only in SONiC).
    std::map<std::string, std::string> lanes;
};

// Facts from a running config read by SonicDriver (its "_kiln" part); a
// running config without one (tests that build it by hand) gives defaults.
SonicFacts facts_from_running(const nlohmann::json& running);

// Where SONiC keeps a SKU's headroom table; empty when platform or hwsku is
// missing or holds a character that has no place in a path.
std::string pg_lookup_path(const std::string& platform, const std::string& hwsku);

}  // namespace kiln::network::sonic
