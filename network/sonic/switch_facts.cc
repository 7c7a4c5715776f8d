#include "network/sonic/switch_facts.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace kiln::network::sonic {

namespace {

using nlohmann::json;

std::string field(const json& db, const std::string& table, const std::string& key, const std::string& name) {
    const auto t = db.find(table);
    if (t == db.end() || !t->is_object()) return {};
    const auto e = t->find(key);
    if (e == t->end() || !e->is_object()) return {};
    const auto f = e->find(name);
    return f != e->end() && f->is_string() ? f->get<std::string>() : std::string();
}

bool path_safe(const std::string& s) {
    return !s.empty() && s != "." && s != ".." && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '-' || c == '.';
    });
}

// "3" -> {3,3}, "3-4" -> {3,4}; {-1,-1} otherwise.
std::pair<int, int> queue_range(const std::string& s) {
    int lo = -1, hi = -1;
    char extra = 0;
    if (std::sscanf(s.c_str(), "%d-%d%c", &lo, &hi, &extra) == 2 && lo >= 0 && hi >= lo) return {lo, hi};
    if (std::sscanf(s.c_str(), "%d%c", &lo, &extra) == 1 && lo >= 0) return {lo, lo};
    return {-1, -1};
}

// The profiles the switch's own BUFFER_QUEUE gives a port's lossless queues
// (those in its PORT_QOS_MAP pfc_enable) and its queue 0, from the first
// port that has both, each only if BUFFER_PROFILE has it.
void queue_profiles(const json& db, SonicFacts& f) {
    auto exists = [&](const std::string& p) { return !p.empty() && !field(db, "BUFFER_PROFILE", p, "pool").empty(); };
    std::map<std::string, std::pair<std::string, std::string>> per_port;  // port -> (lossless, lossy)
    if (auto t = db.find("BUFFER_QUEUE"); t != db.end() && t->is_object())
        for (auto e = t->begin(); e != t->end(); ++e) {
            const std::string& key = e.key();
            const size_t bar = key.rfind('|');
            if (bar == std::string::npos || !e->is_object()) continue;
            const std::string port = key.substr(0, bar);
            const auto [lo, hi] = queue_range(key.substr(bar + 1));
            const auto pf = e->find("profile");
            const std::string profile = pf != e->end() && pf->is_string() ? pf->get<std::string>() : std::string();
            if (lo < 0 || profile.empty()) continue;
            auto& [lossless, lossy] = per_port[port];
            if (lo == 0) lossy = profile;
            std::string pfc = field(db, "PORT_QOS_MAP", port, "pfc_enable");
            for (char& c : pfc)
                if (c == ',') c = ' ';
            std::istringstream prios(pfc);
            for (int q; prios >> q;)
                if (q >= lo && q <= hi) lossless = profile;
        }
    for (const auto& [port, pr] : per_port)
        if (exists(pr.first) && exists(pr.second)) {
            f.queue_lossless_profile = pr.first;
            f.queue_lossy_profile = pr.second;
            return;
        }
    if (exists("egress_lossless_profile") && exists("egress_lossy_profile")) {
        f.queue_lossless_profile = "egress_lossless_profile";
        f.queue_lossy_profile = "egress_lossy_profile";
    }
}

}  // namespace

std::string pg_lookup_path(const std::string& platform, const std::string& hwsku) {
    if (!path_safe(platform) || !path_safe(hwsku)) return {};
    return "/usr/share/sonic/device/" + platform + "/" + hwsku + "/pg_profile_lookup.ini";
}

SonicFacts facts_from_running(const json& running) {
    SonicFacts f;
    if (!running.is_object()) return f;
    const auto k = running.find(kFactsKey);
    if (k == running.end() || !k->is_object()) return f;
    const json& db = k->value("config_db", json::object());
    if (const std::string m = field(db, "DEVICE_METADATA", "localhost", "buffer_model"); !m.empty()) f.buffer_model = m;
    f.platform = field(db, "DEVICE_METADATA", "localhost", "platform");
    f.hwsku = field(db, "DEVICE_METADATA", "localhost", "hwsku");
    f.pool_mode = field(db, "BUFFER_POOL", "ingress_lossless_pool", "mode");
    if (auto t = db.find("CABLE_LENGTH"); t != db.end() && t->is_object() && !t->empty())
        f.cable_length_key = t->begin().key();
    queue_profiles(db, f);
    if (auto t = db.find("PORT_QOS_MAP"); t != db.end() && t->is_object())
        for (auto e = t->begin(); e != t->end(); ++e)
            if (e->is_object() && e->contains("pfc_to_pg_map")) f.pfc_to_pg_ports.insert(e.key());
    if (auto t = db.find("PORT"); t != db.end() && t->is_object())
        for (auto e = t->begin(); e != t->end(); ++e)
            if (e->is_object() && e->contains("lanes") && (*e)["lanes"].is_string())
                f.lanes[e.key()] = (*e)["lanes"].get<std::string>();
    f.pg_lookup_path = k->value("pg_lookup_path", std::string());
    f.pg_lookup_error = k->value("pg_lookup_error", std::string());
    if (auto t = k->find("pg_lookup"); t != k->end() && t->is_string()) {
        auto parsed = parse_pg_lookup(t->get<std::string>(),
                                      f.pg_lookup_path.empty() ? "pg_profile_lookup.ini" : f.pg_lookup_path);
        if (parsed)
            f.pg_lookup = std::move(*parsed);
        else
            f.pg_lookup_error = parsed.error().message;
    }
    return f;
}

}  // namespace kiln::network::sonic
