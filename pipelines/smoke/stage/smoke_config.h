// [smoke.NAME]: the table the smoke stage owns, read by its module rather
// than the core loader (config_table.h). A node picks its profile with
// `smoke = "NAME"`; nodes of one rack (or the fleet) picking a profile of
// scope "rack" ("fleet") share one smoke ring, which the module checks
// against the fleet's [limits] once every node is read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::smoke {

struct SmokeProfile {
    std::string name;
    std::map<std::string, double> thresholds;  // check name -> floor (or ceiling by check)
    config::Duration timeout{std::chrono::minutes(20)};
    // Which VMs share one ring: "node" (each node's own VMs), "rack" (every
    // node of a rack with this profile) or "fleet" (every node with it).
    std::string scope = "node";
    config::SourcePos scope_pos;  // line 0: not written
    // Fleet-relative verdicts (docs/smoke.md): a VM whose floor-type figure
    // is below this fraction of the ring's median warns or fails. 0: off.
    double relative_floor = 0;
    std::string relative_verdict = "fail";  // warn | fail
    // The RDMA checks' writes (docs/smoke.md, "RDMA checks"): bytes per
    // write, writes per pair, and one pair's bound. Unset: kiln-smoke's
    // defaults (64 KiB, 200, 30 s). A 400 Gb/s rail wants more bytes than
    // that to measure; a TCG lab fewer.
    std::optional<int64_t> rdma_bytes;
    std::optional<int64_t> rdma_iterations;
    std::optional<config::Duration> rdma_pair_timeout;
    config::SourcePos pos;
};

// The table's key, which is also the node key that picks a profile.
inline constexpr const char* kSmokeTable = "smoke";

// The table's key, reader, node key and ring check, for the stage registry.
config::ConfigTable smoke_table();

// What the fleet defines, and what this node picks (nullptr: none).
const config::Profiles<SmokeProfile>* smoke_profiles(const config::Fleet& fleet);
const SmokeProfile* smoke_profile(const config::Fleet& fleet, const config::Node& node);
// Adds a profile, for a fleet built in code (tests, benchmarks); its ring
// members are then indexed by the fleet's next index().
void add_smoke_profile(config::Fleet& fleet, SmokeProfile profile);
// The profile `name` of a fleet built in code, to change it (nullptr: none).
SmokeProfile* mutable_smoke_profile(config::Fleet& fleet, const std::string& name);

// The ring's scope for this node: its profile's, "node" when it picks none.
const std::string& ring_scope(const config::Fleet& fleet, const config::Node& node);
// The nodes whose VMs share one smoke ring with this node's, in fleet
// order, the node included (just the node for scope "node"). A node whose
// pipeline has no smoke stage joins no one else's ring.
std::vector<const config::Node*> smoke_ring(const config::Fleet& fleet, const config::Node& node);

}  // namespace kiln::smoke
