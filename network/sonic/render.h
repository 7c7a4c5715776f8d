// Renders kiln's RoCE profile into SONiC CONFIG_DB tables for a set of ports.
//
// What the render holds, per the profile:
// - DSCP_TO_TC_MAP: roce_dscp -> lossless_priority, cnp_dscp -> cnp_priority,
//   every other DSCP -> TC 0. SONiC's stock template maps DSCP 26 to TC 1, so
//   all 64 code points are written: the map replaces the stock one whole.
// - TC_TO_QUEUE_MAP and MAP_PFC_PRIORITY_TO_QUEUE: identity over 0..7, so
//   TC, priority and queue numbers coincide.
// - TC_TO_PRIORITY_GROUP_MAP: the lossless TC to its own PG, the rest to PG 0.
// - PORT: admin up, lanes, speed, mtu = switch_mtu.
// - PORT_QOS_MAP per port: the maps above, pfc_enable and pfcwd_sw_enable on
//   the lossless priority only; "global" carries the DSCP map too. Fields kiln
//   does not render (a SKU's pfc_to_pg_map) stay as the switch has them.
// - WRED_PROFILE: ECN on all colours, thresholds from ecn_min_kb/ecn_max_kb.
// - QUEUE: the lossless queue with the WRED profile and a DWRR scheduler; the
//   CNP queue with a strict scheduler.
// - PFC_WD per port: action, detection and restoration times; PFC_WD|GLOBAL
//   POLL_INTERVAL (SONiC refuses a detection time below it).
// - buffer_policy "lossless", rendered only with the switch's facts
//   (switch_facts.h), since the numbers are the switch's own:
//   CABLE_LENGTH per port; in the traditional buffer model the SKU's
//   pg_profile_lookup.ini row for the port's speed and cable as
//   BUFFER_PROFILE pg_lossless_<speed>_<cable>_profile (the name and fields
//   SONiC's buffer manager gives it, so it never rewrites kiln's rows) and
//   BUFFER_PG|<port>|<lossless priority>; in the dynamic model BUFFER_PG
//   profile "NULL" (the switch computes the headroom from the cable length);
//   BUFFER_QUEUE (the lossless queue and the others on the profiles the
//   switch's own template gives its lossless and lossy queues, see
//   SonicFacts) where the switch has such profiles; and, on
//   ports whose SKU maps PFC priorities to PGs, PFC_PRIORITY_TO_PRIORITY_GROUP_MAP.
//   "default" leaves buffers to the switch's own buffer manager.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "network/fabric.h"
#include "network/sonic/config_db.h"
#include "network/sonic/switch_facts.h"
#include "network/stage/network_config.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"

namespace kiln::network::sonic {

struct RenderOptions {
    // Name of every rendered map and of the WRED profile; schedulers get
    // "<name>_LOSSLESS" and "<name>_CNP". SONiC allows [A-Za-z0-9][-A-Za-z0-9_]{0,31}.
    std::string name = "ROCE";
    // SONiC's stock pool name, so the profile binds to the switch's pool.
    std::string ingress_pool = "ingress_lossless_pool";
    // The switch's facts (read with its running config). Null: render only
    // what does not depend on the switch, without buffer tables (an offline
    // `kiln network render`).
    const SonicFacts* facts = nullptr;
};

// The profile's own consistency (priorities in 0..7 and distinct, DSCPs in
// 0..63 and distinct, ECN min <= max, a known buffer policy). Ranges SONiC's
// YANG already bounds (MTU, watchdog times) are left to the YANG check.
Status check_profile(const network::RoceProfile& profile);

// The tables for `ports` on one switch.
Result<ConfigDb> render_roce(const network::RoceProfile& profile, const std::vector<Port>& ports,
                             const RenderOptions& options = {});

// One SONiC switch of the fabric, with the profile its nodes name.
Result<ConfigDb> render_switch(const config::Fleet& fleet, const FabricSwitch& sw, const RenderOptions& options = {});

// The PG profile SONiC's traditional buffer manager names for a port:
// pg_lossless_<speed>_<cable>m_profile.
std::string lossless_profile_name(int speed_mbps, int cable_m);

}  // namespace kiln::network::sonic
