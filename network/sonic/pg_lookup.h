// A SONiC SKU's PG headroom table: /usr/share/sonic/device/<platform>/<hwsku>/
// pg_profile_lookup.ini. In SONiC's traditional buffer model the switch's
// buffer manager (buffermgrd) sizes every lossless PG from this table by the
// port's speed and its CABLE_LENGTH, into a profile named
// pg_lossless_<speed>_<cable>_profile; a port whose speed and cable length
// have no row gets no lossless headroom at all. Vendors compute the rows from
// their ASIC's cell size, pipeline latency and PHY delays, so kiln takes them
// from the switch rather than from a formula of its own.
//
// Format (one row per line, '#' comments):
//   speed cable size xon xoff threshold [xon_offset]
//   400000  5m  250880  19456  231424  0
#pragma once

#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::network::sonic {

struct PgLookupRow {
    int speed_mbps = 0;
    int cable_m = 0;  // "5m" -> 5
    std::string size, xon, xoff, threshold;
    std::string xon_offset;  // empty when the table has no such column
};

struct PgLookup {
    std::vector<PgLookupRow> rows;

    // The row buffermgrd uses for a cable of `cable_m` metres: the exact
    // length, else the shortest longer one the table offers (more headroom
    // than needed, never less). Errors name the speed, the length and what
    // the table offers.
    Result<PgLookupRow> row_for(int speed_mbps, int cable_m) const;
};

// Parses the file's text; `source` names it in errors ("FILE:LINE: ...").
Result<PgLookup> parse_pg_lookup(const std::string& text, const std::string& source);

}  // namespace kiln::network::sonic
