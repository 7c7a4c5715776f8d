#include "network/stage/network_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "provisioner/config/toml_reader.h"

namespace kiln::network {

namespace {

using config::TableReader;

// pfc_priorities: an array of priorities 0..7, each of which must be the
// lossless priority (the one roce_dscp maps to).
void read_pfc_priorities(TableReader& r, RoceProfile& p) {
    const auto& ctx = r.ctx();
    p.pfc_priorities = {p.lossless_priority};
    const toml::node* v = r.node("pfc_priorities");
    if (!v) return;
    const toml::array* arr = v->as_array();
    if (!arr) {
        ctx.error(v->source(), r.key_path("pfc_priorities"),
                  fmt::format("expected array of integers, found {}", config::toml_type_name(*v)));
        return;
    }
    if (arr->empty()) {
        ctx.error(v->source(), r.key_path("pfc_priorities"),
                  fmt::format("expected [{}]: RoCE needs PFC on lossless_priority", p.lossless_priority));
        return;
    }
    p.pfc_priorities.clear();
    for (size_t k = 0; k < arr->size(); ++k) {
        const toml::node& e = *arr->get(k);
        const std::string key = fmt::format("{}[{}]", r.key_path("pfc_priorities"), k);
        if (!e.is_integer() || *e.value<int64_t>() < 0 || *e.value<int64_t>() > 7) {
            ctx.error(e.source(), key, "expected a priority 0..7");
            continue;
        }
        const int prio = static_cast<int>(*e.value<int64_t>());
        if (prio != p.lossless_priority) {
            ctx.error(e.source(), key,
                      fmt::format("PFC on priority {} which carries no RoCE traffic (roce_dscp {} "
                                  "maps to lossless_priority {})",
                                  prio, p.roce_dscp, p.lossless_priority));
            continue;
        }
        if (std::find(p.pfc_priorities.begin(), p.pfc_priorities.end(), prio) == p.pfc_priorities.end())
            p.pfc_priorities.push_back(prio);
    }
}

void read_pfc_watchdog(TableReader& r, RoceProfile& p) {
    const toml::table* wd = r.table("pfc_watchdog");
    if (!wd) return;
    TableReader wr(r.ctx(), *wd, r.key_path("pfc_watchdog"));
    if (auto v = wr.choice("action", {"drop", "forward", "alert"})) p.pfc_watchdog_action = *v;
    if (auto v = wr.integer("detection_ms", 1, 60000)) p.pfc_watchdog_detection_ms = static_cast<int>(*v);
    if (auto v = wr.integer("restoration_ms", 1, 600000)) p.pfc_watchdog_restoration_ms = static_cast<int>(*v);
    // SONiC's YANG bounds POLL_INTERVAL to 100..1000 ms.
    if (auto v = wr.integer("poll_ms", 100, 1000)) p.pfc_watchdog_poll_ms = static_cast<int>(*v);
    if (p.pfc_watchdog_detection_ms < p.pfc_watchdog_poll_ms)
        config::pair_error(wr, "detection_ms", "poll_ms",
                           fmt::format("expected detection_ms >= poll_ms ({}): the switch refuses a watchdog "
                                       "that detects faster than it polls",
                                       p.pfc_watchdog_poll_ms),
                           fmt::format("expected poll_ms <= detection_ms ({})", p.pfc_watchdog_detection_ms));
    if (p.pfc_watchdog_restoration_ms < p.pfc_watchdog_poll_ms)
        config::pair_error(wr, "restoration_ms", "poll_ms",
                           fmt::format("expected restoration_ms >= poll_ms ({})", p.pfc_watchdog_poll_ms),
                           fmt::format("expected poll_ms <= restoration_ms ({})", p.pfc_watchdog_restoration_ms));
    wr.finish();
}

RoceProfile read_roce(const std::string& name, TableReader& r, config::TableScope&) {
    RoceProfile p;
    p.name = name;
    p.pos = r.pos();
    const auto& ctx = r.ctx();
    for (const auto& [k, v] : r.table()) {
        p.given.insert(std::string(k.str()));
        if (const toml::table* sub = v.as_table(); sub && k.str() == "pfc_watchdog")
            for (const auto& kv : *sub) p.given.insert("pfc_watchdog." + std::string(kv.first.str()));
    }
    auto set_int = [&](const char* key, int64_t lo, int64_t hi, int& field) {
        if (auto v = r.integer(key, lo, hi)) field = static_cast<int>(*v);
    };
    set_int("lossless_priority", 0, 7, p.lossless_priority);
    set_int("roce_dscp", 0, 63, p.roce_dscp);
    set_int("cnp_dscp", 0, 63, p.cnp_dscp);
    set_int("cnp_priority", 0, 7, p.cnp_priority);
    set_int("ecn_min_kb", 1, 1 << 20, p.ecn_min_kb);
    set_int("ecn_max_kb", 1, 1 << 20, p.ecn_max_kb);
    set_int("ecn_probability_pct", 0, 100, p.ecn_probability_pct);
    // RoCE's smallest path MTU is 1024: below it RDMA does not run at all.
    auto set_mtu = [&](const char* key, int64_t hi, int& field) {
        const toml::node* n = r.table().get(key);
        if (n && n->is_integer() && *n->value<int64_t>() < 1024) {
            r.node(key);
            ctx.error(n->source(), r.key_path(key),
                      fmt::format("expected 1280..{}, found {}: below 1024, the smallest MTU RoCE runs on", hi,
                                  *n->value<int64_t>()));
            return;
        }
        set_int(key, 1280, hi, field);
    };
    set_mtu("host_mtu", 9000, p.host_mtu);
    set_mtu("switch_mtu", 9216, p.switch_mtu);
    read_pfc_priorities(r, p);
    if (auto v = r.choice("buffer_policy", {"lossless", "default"})) p.buffer_policy = *v;
    read_pfc_watchdog(r, p);
    if (p.cnp_dscp == p.roce_dscp)
        config::pair_error(r, "cnp_dscp", "roce_dscp",
                           fmt::format("expected a DSCP different from roce_dscp ({})", p.roce_dscp),
                           fmt::format("expected a DSCP different from cnp_dscp ({})", p.cnp_dscp));
    if (p.cnp_priority == p.lossless_priority)
        config::pair_error(
            r, "cnp_priority", "lossless_priority",
            fmt::format("expected a priority different from lossless_priority ({})", p.lossless_priority),
            fmt::format("expected a priority different from cnp_priority ({})", p.cnp_priority));
    if (p.ecn_min_kb >= p.ecn_max_kb)
        config::pair_error(r, "ecn_min_kb", "ecn_max_kb",
                           fmt::format("expected ecn_min_kb < ecn_max_kb ({})", p.ecn_max_kb),
                           fmt::format("expected ecn_max_kb > ecn_min_kb ({})", p.ecn_min_kb));
    if (p.switch_mtu < p.host_mtu)
        config::pair_error(r, "switch_mtu", "host_mtu", fmt::format("expected switch_mtu >= host_mtu ({})", p.host_mtu),
                           fmt::format("expected host_mtu <= switch_mtu ({})", p.switch_mtu));
    return p;
}

}  // namespace

config::ConfigTable network_table() {
    return config::named_profiles_table<RoceProfile>(kNetworkTable, kNetworkTable, read_roce);
}

const config::Profiles<RoceProfile>* network_profiles(const config::Fleet& fleet) {
    return fleet.table<config::Profiles<RoceProfile>>(kNetworkTable);
}

const RoceProfile* network_profile(const config::Fleet& fleet, const config::Node& node) {
    return fleet.picked<RoceProfile>(kNetworkTable, node, kNetworkTable);
}

const RoceProfile* find_network_profile(const config::Fleet& fleet, const std::string& name) {
    return fleet.profile<RoceProfile>(kNetworkTable, name);
}

void add_network_profile(config::Fleet& fleet, RoceProfile profile) {
    config::add_profile(fleet, kNetworkTable, std::move(profile));
}

RoceProfile* mutable_network_profile(config::Fleet& fleet, const std::string& name) {
    return config::mutable_profile<RoceProfile>(fleet, kNetworkTable, name);
}

}  // namespace kiln::network
