// SONiC CONFIG_DB contents in config_db.json's shape:
//   {"TABLE": {"key": {"field": "value"}}}
// Keys with several parts are joined by '|' ("Ethernet0|3"), as in Redis,
// where the full key is "TABLE|Ethernet0|3". Values are strings; leaf-lists
// may be arrays of strings. This is what renderers produce and what the YANG
// validator and (later) apply-patch consume.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::network::sonic {

// "Ethernet0", "3" -> "Ethernet0|3".
std::string join_key(std::initializer_list<std::string> parts);
// "Ethernet0|3" -> {"Ethernet0", "3"}.
std::vector<std::string> split_key(const std::string& key);

class ConfigDb {
public:
    ConfigDb() = default;

    // Checks the shape: objects three deep, values strings or arrays of strings.
    static Result<ConfigDb> from_json(nlohmann::json doc);

    void set(const std::string& table, const std::string& key, const std::string& field, std::string value);
    // An entry with no fields (a key that exists for its own sake).
    void touch(const std::string& table, const std::string& key);

    bool has(const std::string& table, const std::string& key) const;
    std::optional<std::string> get(const std::string& table, const std::string& key, const std::string& field) const;
    std::vector<std::string> keys(const std::string& table) const;  // sorted

    // "TABLE|key" for every entry, sorted: the Redis keys this config writes.
    std::vector<std::string> redis_keys() const;

    const nlohmann::json& json() const { return doc_; }

private:
    explicit ConfigDb(nlohmann::json doc) : doc_(std::move(doc)) {}
    nlohmann::json doc_ = nlohmann::json::object();
};

}  // namespace kiln::network::sonic
