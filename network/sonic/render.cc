#include "network/sonic/render.h"

#include <fmt/format.h>

namespace kiln::network::sonic {

namespace {

constexpr int kPriorities = 8;  // 802.1p priorities, SONiC TCs and queues 0..7
constexpr int kDscpValues = 64;

Error profile_error(const network::RoceProfile& p, std::string message) {
    return make_error("network", "network.bad_profile",
                      p.name.empty() ? message : fmt::format("network profile {}: {}", p.name, message));
}

std::string str(long long v) {
    return std::to_string(v);
}

}  // namespace

Status check_profile(const network::RoceProfile& p) {
    auto in = [](int v, int lo, int hi) { return v >= lo && v <= hi; };
    if (!in(p.lossless_priority, 0, kPriorities - 1))
        return profile_error(p, fmt::format("lossless_priority must be 0..7, got {}", p.lossless_priority));
    if (!in(p.cnp_priority, 0, kPriorities - 1))
        return profile_error(p, fmt::format("cnp_priority must be 0..7, got {}", p.cnp_priority));
    if (p.cnp_priority == p.lossless_priority)
        return profile_error(p, fmt::format("cnp_priority {} must differ from lossless_priority: CNPs must not be "
                                            "paused behind the traffic they throttle",
                                            p.cnp_priority));
    if (p.lossless_priority == 0)
        return profile_error(p, "lossless_priority must not be 0: priority 0 carries all unclassified traffic");
    if (!in(p.roce_dscp, 0, kDscpValues - 1))
        return profile_error(p, fmt::format("roce_dscp must be 0..63, got {}", p.roce_dscp));
    if (!in(p.cnp_dscp, 0, kDscpValues - 1))
        return profile_error(p, fmt::format("cnp_dscp must be 0..63, got {}", p.cnp_dscp));
    if (p.roce_dscp == p.cnp_dscp)
        return profile_error(p, fmt::format("roce_dscp and cnp_dscp are both {}", p.roce_dscp));
    if (p.ecn_min_kb < 0 || p.ecn_max_kb < p.ecn_min_kb)
        return profile_error(p, fmt::format("ECN thresholds need 0 <= ecn_min_kb <= ecn_max_kb, got {} and {}",
                                            p.ecn_min_kb, p.ecn_max_kb));
    if (p.pfc_watchdog_detection_ms < p.pfc_watchdog_poll_ms || p.pfc_watchdog_restoration_ms < p.pfc_watchdog_poll_ms)
        return profile_error(
            p, fmt::format("PFC watchdog detection ({} ms) and restoration ({} ms) must be at least "
                           "its poll interval ({} ms)",
                           p.pfc_watchdog_detection_ms, p.pfc_watchdog_restoration_ms, p.pfc_watchdog_poll_ms));
    if (p.buffer_policy != "lossless" && p.buffer_policy != "default")
        return profile_error(p, fmt::format("buffer_policy must be lossless or default, got {}", p.buffer_policy));
    return ok_status();
}

std::string lossless_profile_name(int speed_mbps, int cable_m) {
    return fmt::format("pg_lossless_{}_{}m_profile", speed_mbps, cable_m);
}

namespace {

// "0-2,4-6": the queues 0..6 other than `skip`, as ranges (SONiC's stock
// BUFFER_QUEUE leaves queue 7 alone; so does kiln).
std::vector<std::string> ranges_without(int skip, int last) {
    std::vector<std::string> out;
    int start = -1;
    for (int q = 0; q <= last + 1; ++q) {
        const bool in = q <= last && q != skip;
        if (in && start < 0) start = q;
        if (!in && start >= 0) {
            out.push_back(start == q - 1 ? std::to_string(start) : fmt::format("{}-{}", start, q - 1));
            start = -1;
        }
    }
    return out;
}

// The lossless tables that depend on the switch: its buffer model, its SKU's
// headroom table and the shared objects its templates made.
Status render_buffers(ConfigDb& db, const network::RoceProfile& p, const std::vector<Port>& ports,
                      const RenderOptions& opt) {
    const SonicFacts& f = *opt.facts;
    const std::string lossless = std::to_string(p.lossless_priority);
    if (f.buffer_model != "traditional" && f.buffer_model != "dynamic")
        return make_error("network", "network.buffer_model",
                          fmt::format("DEVICE_METADATA|localhost buffer_model is '{}': kiln knows traditional and "
                                      "dynamic",
                                      f.buffer_model));
    if (f.pool_mode.empty())
        return make_error("network", "network.no_lossless_pool",
                          fmt::format("the switch has no BUFFER_POOL|{} (its buffer template did not run?): kiln "
                                      "binds lossless PGs to it; set buffer_policy = \"default\" to leave buffers "
                                      "to the switch",
                                      opt.ingress_pool));
    const bool traditional = f.buffer_model == "traditional";
    if (traditional && !f.pg_lookup)
        return make_error(
            "network", "network.no_headroom_table",
            fmt::format("the switch uses SONiC's traditional buffer model, which sizes PG headroom from its SKU's "
                        "table, and kiln could not read it ({}{}); set buffer_policy = \"default\" to leave "
                        "buffers to the switch",
                        f.pg_lookup_path.empty() ? "DEVICE_METADATA names no platform/hwsku" : f.pg_lookup_path,
                        f.pg_lookup_error.empty() ? "" : ": " + f.pg_lookup_error));
    const std::string cable_key = f.cable_length_key.empty() ? "AZURE" : f.cable_length_key;
    const std::string pfc_pg_map = opt.name;
    bool pfc_pg_map_used = false;
    for (const auto& port : ports) {
        const std::string& n = port.name;
        const int wanted_m = cable_length_of(port);
        if (traditional) {
            auto row = f.pg_lookup->row_for(port.speed_mbps, wanted_m);
            if (!row)
                return make_error("network", row.error().code, fmt::format("port {}: {}", n, row.error().message));
            // CABLE_LENGTH names the row, so buffermgrd looks up the same one kiln wrote.
            db.set("CABLE_LENGTH", cable_key, n, fmt::format("{}m", row->cable_m));
            const std::string profile = lossless_profile_name(port.speed_mbps, row->cable_m);
            db.set("BUFFER_PROFILE", profile, "pool", opt.ingress_pool);
            db.set("BUFFER_PROFILE", profile, "xon", row->xon);
            if (!row->xon_offset.empty()) db.set("BUFFER_PROFILE", profile, "xon_offset", row->xon_offset);
            db.set("BUFFER_PROFILE", profile, "xoff", row->xoff);
            db.set("BUFFER_PROFILE", profile, "size", row->size);
            // buffermgrd names the threshold after the pool's mode.
            db.set("BUFFER_PROFILE", profile, f.pool_mode + "_th", row->threshold);
            db.set("BUFFER_PG", join_key({n, lossless}), "profile", profile);
        } else {
            db.set("CABLE_LENGTH", cable_key, n, fmt::format("{}m", wanted_m));
            // "NULL": the dynamic buffer manager computes this PG's headroom.
            db.set("BUFFER_PG", join_key({n, lossless}), "profile", "NULL");
        }
        if (!f.queue_lossless_profile.empty() && !f.queue_lossy_profile.empty()) {
            db.set("BUFFER_QUEUE", join_key({n, lossless}), "profile", f.queue_lossless_profile);
            for (const auto& r : ranges_without(p.lossless_priority, 6))
                db.set("BUFFER_QUEUE", join_key({n, r}), "profile", f.queue_lossy_profile);
        }
        if (f.pfc_to_pg_ports.count(n)) {
            db.set("PORT_QOS_MAP", n, "pfc_to_pg_map", pfc_pg_map);
            pfc_pg_map_used = true;
        }
    }
    if (pfc_pg_map_used) db.set("PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", pfc_pg_map, lossless, lossless);
    return ok_status();
}

}  // namespace

Result<ConfigDb> render_roce(const network::RoceProfile& p, const std::vector<Port>& ports, const RenderOptions& opt) {
    if (Status s = check_profile(p); !s) return s.error();
    if (ports.empty()) return make_error("network", "network.no_ports", "nothing to render: no ports given");

    ConfigDb db;
    const std::string& map = opt.name;
    const std::string lossless = str(p.lossless_priority);
    const std::string cnp = str(p.cnp_priority);
    const std::string sched_lossless = map + "_LOSSLESS";
    const std::string sched_cnp = map + "_CNP";

    // Every code point, so nothing of the stock map (26 -> 1) survives.
    for (int d = 0; d < kDscpValues; ++d) {
        int tc = 0;
        if (d == p.roce_dscp) tc = p.lossless_priority;
        if (d == p.cnp_dscp) tc = p.cnp_priority;
        db.set("DSCP_TO_TC_MAP", map, str(d), str(tc));
    }
    for (int i = 0; i < kPriorities; ++i) {
        db.set("TC_TO_QUEUE_MAP", map, str(i), str(i));
        db.set("MAP_PFC_PRIORITY_TO_QUEUE", map, str(i), str(i));
        db.set("TC_TO_PRIORITY_GROUP_MAP", map, str(i), i == p.lossless_priority ? lossless : "0");
    }

    const std::string min_bytes = str(static_cast<long long>(p.ecn_min_kb) * 1024);
    const std::string max_bytes = str(static_cast<long long>(p.ecn_max_kb) * 1024);
    for (const char* colour : {"green", "yellow", "red"}) {
        const std::string c = colour;
        db.set("WRED_PROFILE", map, "wred_" + c + "_enable", "true");
        db.set("WRED_PROFILE", map, c + "_min_threshold", min_bytes);
        db.set("WRED_PROFILE", map, c + "_max_threshold", max_bytes);
        db.set("WRED_PROFILE", map, c + "_drop_probability", str(p.ecn_probability_pct));
    }
    db.set("WRED_PROFILE", map, "ecn", "ecn_all");

    db.set("SCHEDULER", sched_lossless, "type", "DWRR");
    db.set("SCHEDULER", sched_lossless, "weight", "50");
    db.set("SCHEDULER", sched_cnp, "type", "STRICT");

    db.set("PORT_QOS_MAP", "global", "dscp_to_tc_map", map);

    db.set("PFC_WD", "GLOBAL", "POLL_INTERVAL", str(p.pfc_watchdog_poll_ms));

    for (const auto& port : ports) {
        const std::string& n = port.name;
        db.set("PORT", n, "admin_status", "up");
        // No lanes given: leave the switch's own (the YANG check will say if it has none).
        if (!port.lanes.empty()) db.set("PORT", n, "lanes", port.lanes);
        db.set("PORT", n, "speed", str(port.speed_mbps));
        db.set("PORT", n, "mtu", str(p.switch_mtu));
        if (!port.alias.empty()) db.set("PORT", n, "alias", port.alias);
        if (port.peer) db.set("PORT", n, "description", port.peer->node + " " + port.peer->nic);
        if (port.uplink) db.set("PORT", n, "description", port.uplink->switch_name + " " + port.uplink->port);

        db.set("PORT_QOS_MAP", n, "dscp_to_tc_map", map);
        db.set("PORT_QOS_MAP", n, "tc_to_queue_map", map);
        db.set("PORT_QOS_MAP", n, "tc_to_pg_map", map);
        db.set("PORT_QOS_MAP", n, "pfc_to_queue_map", map);
        db.set("PORT_QOS_MAP", n, "pfc_enable", lossless);
        db.set("PORT_QOS_MAP", n, "pfcwd_sw_enable", lossless);

        db.set("QUEUE", join_key({n, lossless}), "scheduler", sched_lossless);
        db.set("QUEUE", join_key({n, lossless}), "wred_profile", map);
        db.set("QUEUE", join_key({n, cnp}), "scheduler", sched_cnp);

        db.set("PFC_WD", n, "action", p.pfc_watchdog_action);
        db.set("PFC_WD", n, "detection_time", str(p.pfc_watchdog_detection_ms));
        db.set("PFC_WD", n, "restoration_time", str(p.pfc_watchdog_restoration_ms));
    }
    if (p.buffer_policy == "lossless" && opt.facts != nullptr)
        if (Status st = render_buffers(db, p, ports, opt); !st) return st.error();
    return db;
}

Result<ConfigDb> render_switch(const config::Fleet& fleet, const FabricSwitch& sw, const RenderOptions& options) {
    if (sw.os != "sonic")
        return make_error("network", "network.wrong_os", fmt::format("switch {} runs {}, not sonic", sw.name, sw.os));
    auto profile = profile_for_switch(fleet, sw);
    if (!profile) return profile.error();
    auto db = render_roce(**profile, sw.ports, options);
    if (!db) return make_error("network", db.error().code, fmt::format("switch {}: {}", sw.name, db.error().message));
    return db;
}

}  // namespace kiln::network::sonic
