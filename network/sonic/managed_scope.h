// Which parts of a SONiC switch's CONFIG_DB kiln owns, so that reading,
// diffing and patching never touch anything else.
//
// For ports P and the render's names (map name N, its two schedulers, the
// ingress pool):
//   switch-wide  DSCP_TO_TC_MAP|N, TC_TO_QUEUE_MAP|N, TC_TO_PRIORITY_GROUP_MAP|N,
//                MAP_PFC_PRIORITY_TO_QUEUE|N, WRED_PROFILE|N, SCHEDULER|N_LOSSLESS,
//                SCHEDULER|N_CNP, PORT_QOS_MAP|global, PFC_WD|GLOBAL,
//                PFC_PRIORITY_TO_PRIORITY_GROUP_MAP|N, BUFFER_PROFILE|pg_lossless_*
//   per port p   PORT|p, PORT_QOS_MAP|p, PFC_WD|p, QUEUE|p|*, BUFFER_PG|p|*,
//                BUFFER_QUEUE|p|*, CABLE_LENGTH|*|p
// select_managed() keeps exactly these from a full `sonic-cfggen -d
// --print-data` dump (what read_running returns).
//
// scope_to_desired() then narrows that to what a diff against `desired` may
// change:
// - PORT, PORT_QOS_MAP, PFC_WD and CABLE_LENGTH are shared with the switch's
//   own settings (fec, autoneg, a SKU's pfc_to_pg_map, other ports' cable
//   lengths...): only the fields kiln renders are compared;
// - QUEUE, BUFFER_PG and BUFFER_QUEUE entries kiln does not render stay, unless their
//   range covers one kiln renders ("3-4" against kiln's "3"): those are
//   removed, since SONiC refuses overlapping ranges;
// - any other entry kiln renders is owned whole (extra fields are removed);
//   entries kiln does not render are left alone.
// Tables and entries that exist on the switch stay as (possibly empty)
// objects, so the JSON Patch adds at the finest level that exists and never
// replaces a whole table.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/fabric.h"
#include "network/sonic/render.h"

namespace kiln::network::sonic {

nlohmann::json select_managed(const nlohmann::json& config_db, const std::vector<std::string>& ports,
                              const RenderOptions& options = {});

nlohmann::json scope_to_desired(const nlohmann::json& running, const nlohmann::json& desired);

// "3" -> {3,3}, "3-4" -> {3,4}; {-1,-1} when not a number or range.
std::pair<int, int> parse_index_range(const std::string& s);

// Per-port tables: the port is the key's first part.
bool is_port_table(const std::string& table);

}  // namespace kiln::network::sonic
