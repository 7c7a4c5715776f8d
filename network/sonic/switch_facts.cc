#include "network/sonic/switch_facts.h"

#include <algorithm>
#include <cctype>

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
    if (const std::string m = field(db, "DEVICE_METADATA", "localhost", "buffer_model"); !m.empty())
        f.buffer_model = m;
    f.platform = field(db, "DEVICE_METADATA", "localhost", "platform");
    f.hwsku = field(db, "DEVICE_METADATA", "localhost", "hwsku");
    f.pool_mode = field(db, "BUFFER_POOL", "ingress_lossless_pool", "mode");
    if (auto t = db.find("CABLE_LENGTH"); t != db.end() && t->is_object() && !t->empty())
        f.cable_length_key = t->begin().key();
    f.egress_profiles = !field(db, "BUFFER_PROFILE", "egress_lossless_profile", "pool").empty() &&
                        !field(db, "BUFFER_PROFILE", "egress_lossy_profile", "pool").empty();
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
        auto parsed = parse_pg_lookup(t->get<std::string>(), f.pg_lookup_path.empty() ? "pg_profile_lookup.ini"
                                                                                      : f.pg_lookup_path);
        if (parsed)
            f.pg_lookup = std::move(*parsed);
        else
            f.pg_lookup_error = parsed.error().message;
    }
    return f;
}

}  // namespace kiln::network::sonic
