#include "network/sonic/managed_scope.h"

#include <algorithm>
#include <set>

#include "network/sonic/config_db.h"

namespace kiln::network::sonic {

namespace {

using nlohmann::json;

const std::set<std::string>& field_scoped_tables() {
    // Shared with the switch's own settings: only the fields kiln renders.
    static const std::set<std::string> t = {"PORT", "BUFFER_POOL", "PORT_QOS_MAP", "PFC_WD", "CABLE_LENGTH"};
    return t;
}

const std::set<std::string>& ranged_tables() {
    static const std::set<std::string> t = {"QUEUE", "BUFFER_PG", "BUFFER_QUEUE"};
    return t;
}

// out[table] as an object: the table exists on the switch, so it stays, even empty.
json& table_in(json& out, const std::string& table) {
    json& t = out[table];
    if (!t.is_object()) t = json::object();
    return t;
}

void keep(json& out, const json& db, const std::string& table, const std::string& key) {
    auto t = db.find(table);
    if (t == db.end() || !t->is_object()) return;
    json& ot = table_in(out, table);
    if (auto e = t->find(key); e != t->end()) ot[key] = *e;
}

}  // namespace

bool is_port_table(const std::string& table) {
    return table == "PORT" || table == "PORT_QOS_MAP" || table == "PFC_WD" || table == "QUEUE" ||
           table == "BUFFER_PG" || table == "BUFFER_QUEUE";
}

std::pair<int, int> parse_index_range(const std::string& s) {
    auto num = [](const std::string& x) {
        if (x.empty() || x.size() > 4 || x.find_first_not_of("0123456789") != std::string::npos) return -1;
        return std::stoi(x);
    };
    const size_t dash = s.find('-');
    if (dash == std::string::npos) {
        const int v = num(s);
        return {v, v};
    }
    const int lo = num(s.substr(0, dash)), hi = num(s.substr(dash + 1));
    if (lo < 0 || hi < lo) return {-1, -1};
    return {lo, hi};
}

json select_managed(const json& db, const std::vector<std::string>& ports, const RenderOptions& opt) {
    json out = json::object();
    if (!db.is_object()) return out;
    const std::string& n = opt.name;
    for (const char* t :
         {"DSCP_TO_TC_MAP", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "MAP_PFC_PRIORITY_TO_QUEUE", "WRED_PROFILE"})
        keep(out, db, t, n);
    keep(out, db, "SCHEDULER", n + "_LOSSLESS");
    keep(out, db, "SCHEDULER", n + "_CNP");
    keep(out, db, "PORT_QOS_MAP", "global");
    keep(out, db, "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", n);
    keep(out, db, "PFC_WD", "GLOBAL");
    if (auto t = db.find("CABLE_LENGTH"); t != db.end() && t->is_object()) {
        // One entry ("AZURE") lists every port: keep only kiln's ports of it.
        json& ot = table_in(out, "CABLE_LENGTH");
        const std::set<std::string> wanted(ports.begin(), ports.end());
        for (auto e = t->begin(); e != t->end(); ++e) {
            json entry = json::object();
            if (e->is_object())
                for (auto f = e->begin(); f != e->end(); ++f)
                    if (wanted.count(f.key())) entry[f.key()] = *f;
            ot[e.key()] = std::move(entry);
        }
    }
    if (auto t = db.find("BUFFER_PROFILE"); t != db.end() && t->is_object()) {
        json& ot = table_in(out, "BUFFER_PROFILE");
        for (auto e = t->begin(); e != t->end(); ++e)
            if (e.key().rfind("pg_lossless_", 0) == 0) ot[e.key()] = *e;
    }
    const std::set<std::string> wanted(ports.begin(), ports.end());
    for (const char* t : {"PORT", "PORT_QOS_MAP", "PFC_WD"})
        for (const auto& p : ports) keep(out, db, t, p);
    for (const char* t : {"QUEUE", "BUFFER_PG", "BUFFER_QUEUE"}) {
        auto tab = db.find(t);
        if (tab == db.end() || !tab->is_object()) continue;
        json& ot = table_in(out, t);
        for (auto e = tab->begin(); e != tab->end(); ++e) {
            const auto parts = split_key(e.key());
            if (!parts.empty() && wanted.count(parts[0])) ot[e.key()] = *e;
        }
    }
    return out;
}

json scope_to_desired(const json& running, const json& desired) {
    json out = json::object();
    if (!running.is_object() || !desired.is_object()) return out;
    for (auto dt = desired.begin(); dt != desired.end(); ++dt) {
        const std::string& table = dt.key();
        auto rt = running.find(table);
        if (rt == running.end() || !rt->is_object()) continue;
        json& ot = out[table];
        ot = json::object();
        for (auto re = rt->begin(); re != rt->end(); ++re) {
            const std::string& key = re.key();
            auto de = dt->find(key);
            if (de != dt->end()) {
                if (field_scoped_tables().count(table) && re->is_object() && de->is_object()) {
                    json fields = json::object();
                    for (auto f = re->begin(); f != re->end(); ++f)
                        if (de->contains(f.key())) fields[f.key()] = *f;
                    ot[key] = std::move(fields);
                } else {
                    ot[key] = *re;
                }
                continue;
            }
            if (!ranged_tables().count(table)) continue;
            // Kiln does not render this key: take it only when its range covers one kiln renders.
            const auto parts = split_key(key);
            if (parts.size() != 2) continue;
            const auto [lo, hi] = parse_index_range(parts[1]);
            if (lo < 0) continue;
            for (auto d = dt->begin(); d != dt->end(); ++d) {
                const auto dparts = split_key(d.key());
                if (dparts.size() != 2 || dparts[0] != parts[0]) continue;
                const auto [dlo, dhi] = parse_index_range(dparts[1]);
                if (dlo >= 0 && dlo <= hi && lo <= dhi) {
                    ot[key] = *re;
                    break;
                }
            }
        }
    }
    return out;
}

}  // namespace kiln::network::sonic
