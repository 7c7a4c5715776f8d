#include "network/sonic/render.h"

#include <fmt/format.h>

namespace kiln::network::sonic {

namespace {

constexpr int kPriorities = 8;  // 802.1p priorities, SONiC TCs and queues 0..7
constexpr int kDscpValues = 64;

Error profile_error(const config::RoceProfile& p, std::string message) {
    return make_error("network", "bad-profile",
                      p.name.empty() ? message : fmt::format("network profile {}: {}", p.name, message));
}

std::string str(long long v) {
    return std::to_string(v);
}

}  // namespace

Status check_profile(const config::RoceProfile& p) {
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
    if (p.buffer_policy != "lossless" && p.buffer_policy != "default")
        return profile_error(p, fmt::format("buffer_policy must be lossless or default, got {}", p.buffer_policy));
    return ok_status();
}

Headroom estimate_headroom(int speed_mbps, int cable_length_m, int mtu) {
    // Propagation ~5 ns/m each way, plus ~1000 ns for the peer to react.
    const std::uint64_t ns = 10ull * static_cast<std::uint64_t>(cable_length_m) + 1000ull;
    const std::uint64_t bits = static_cast<std::uint64_t>(speed_mbps) * ns / 1000ull;  // Mb/s * ns = 1e-3 bits
    Headroom h;
    h.xon = 2ull * static_cast<std::uint64_t>(mtu);
    h.xoff = bits / 8 + 2ull * static_cast<std::uint64_t>(mtu);
    h.size = h.xon + h.xoff;
    return h;
}

Result<ConfigDb> render_roce(const config::RoceProfile& p, const std::vector<Port>& ports, const RenderOptions& opt) {
    if (Status s = check_profile(p); !s) return s.error();
    if (ports.empty()) return make_error("network", "no-ports", "nothing to render: no ports given");

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

    const bool buffers = p.buffer_policy == "lossless";
    if (buffers) {
        db.set("BUFFER_POOL", opt.ingress_pool, "type", "ingress");
        db.set("BUFFER_POOL", opt.ingress_pool, "mode", "dynamic");
        if (opt.ingress_pool_bytes > 0)
            db.set("BUFFER_POOL", opt.ingress_pool, "size", std::to_string(opt.ingress_pool_bytes));
    }

    for (const auto& port : ports) {
        const std::string& n = port.name;
        db.set("PORT", n, "admin_status", "up");
        // No lanes given: leave the switch's own (the YANG check will say if it has none).
        if (!port.lanes.empty()) db.set("PORT", n, "lanes", port.lanes);
        db.set("PORT", n, "speed", str(port.speed_mbps));
        db.set("PORT", n, "mtu", str(p.switch_mtu));
        if (!port.alias.empty()) db.set("PORT", n, "alias", port.alias);
        if (port.peer) db.set("PORT", n, "description", port.peer->node + " " + port.peer->nic);

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

        if (buffers) {
            // SONiC's own naming, pg_lossless_<speed>_<cable>_profile.
            const std::string profile = fmt::format("pg_lossless_{}_{}m_profile", port.speed_mbps, opt.cable_length_m);
            const Headroom h = estimate_headroom(port.speed_mbps, opt.cable_length_m, p.switch_mtu);
            db.set("BUFFER_PROFILE", profile, "pool", opt.ingress_pool);
            db.set("BUFFER_PROFILE", profile, "size", std::to_string(h.size));
            db.set("BUFFER_PROFILE", profile, "xon", std::to_string(h.xon));
            db.set("BUFFER_PROFILE", profile, "xoff", std::to_string(h.xoff));
            db.set("BUFFER_PROFILE", profile, "dynamic_th", "0");
            db.set("BUFFER_PG", join_key({n, lossless}), "profile", profile);
        }
    }
    return db;
}

Result<ConfigDb> render_switch(const config::Fleet& fleet, const FabricSwitch& sw, const RenderOptions& options) {
    if (sw.os != "sonic")
        return make_error("network", "wrong-os", fmt::format("switch {} runs {}, not sonic", sw.name, sw.os));
    auto profile = profile_for_switch(fleet, sw);
    if (!profile) return profile.error();
    auto db = render_roce(**profile, sw.ports, options);
    if (!db) return make_error("network", db.error().code, fmt::format("switch {}: {}", sw.name, db.error().message));
    return db;
}

}  // namespace kiln::network::sonic
