#include "network/sonic/config_db.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::network::sonic {

using Json = nlohmann::json;

std::string join_key(std::initializer_list<std::string> parts) {
    std::string out;
    for (const auto& p : parts) {
        if (!out.empty()) out += '|';
        out += p;
    }
    return out;
}

std::vector<std::string> split_key(const std::string& key) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        size_t bar = key.find('|', start);
        out.push_back(key.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
        if (bar == std::string::npos) break;
        start = bar + 1;
    }
    return out;
}

Result<ConfigDb> ConfigDb::from_json(Json doc) {
    auto bad = [](std::string where, std::string what) {
        return make_error("network", "network.config_db_shape", fmt::format("{}: {}", where, what));
    };
    if (!doc.is_object()) return bad("CONFIG_DB", "must be an object of tables");
    for (const auto& [table, rows] : doc.items()) {
        if (!rows.is_object()) return bad(table, "a table must be an object of keys");
        for (const auto& [key, fields] : rows.items()) {
            const std::string where = fmt::format("{}|{}", table, key);
            if (!fields.is_object()) return bad(where, "an entry must be an object of fields");
            for (const auto& [field, value] : fields.items()) {
                bool ok = value.is_string();
                if (value.is_array()) {
                    ok = true;
                    for (const auto& v : value) ok = ok && v.is_string();
                }
                if (!ok)
                    return bad(fmt::format("{}: {}", where, field), "a value must be a string or a list of strings");
            }
        }
    }
    return ConfigDb(std::move(doc));
}

void ConfigDb::set(const std::string& table, const std::string& key, const std::string& field, std::string value) {
    doc_[table][key][field] = std::move(value);
}

void ConfigDb::touch(const std::string& table, const std::string& key) {
    auto& row = doc_[table][key];
    if (row.is_null()) row = Json::object();
}

bool ConfigDb::has(const std::string& table, const std::string& key) const {
    auto t = doc_.find(table);
    return t != doc_.end() && t->contains(key);
}

std::optional<std::string> ConfigDb::get(const std::string& table, const std::string& key,
                                         const std::string& field) const {
    auto t = doc_.find(table);
    if (t == doc_.end()) return std::nullopt;
    auto k = t->find(key);
    if (k == t->end()) return std::nullopt;
    auto f = k->find(field);
    if (f == k->end() || !f->is_string()) return std::nullopt;
    return f->get<std::string>();
}

std::vector<std::string> ConfigDb::keys(const std::string& table) const {
    std::vector<std::string> out;
    auto t = doc_.find(table);
    if (t == doc_.end()) return out;
    for (const auto& [key, _] : t->items()) out.push_back(key);
    return out;  // nlohmann::json objects iterate in sorted key order
}

std::vector<std::string> ConfigDb::redis_keys() const {
    std::vector<std::string> out;
    for (const auto& [table, rows] : doc_.items())
        for (const auto& [key, _] : rows.items()) out.push_back(fmt::format("{}|{}", table, key));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace kiln::network::sonic
