#include "pipelines/smoke/thresholds.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

namespace kiln::smoke {

namespace {
bool fail(std::string* err, const std::string& m) {
    if (err) *err = m;
    return false;
}
}  // namespace

bool Thresholds::load_floors(const std::string& text, std::string* err) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("profiles") || !j["profiles"].is_object())
        return fail(err, "floors: expected {\"profiles\": {NAME: {CHECK: number}}}");
    for (const auto& [name, table] : j["profiles"].items()) {
        if (!table.is_object()) return fail(err, "floors: profile '" + name + "' is not an object");
        for (const auto& [check, v] : table.items()) {
            if (!v.is_number()) return fail(err, "floors: " + name + "." + check + " is not a number");
            profiles_[name][check] = v.get<double>();
        }
    }
    return true;
}

bool Thresholds::select(const std::string& model, std::string* err) {
    if (profiles_.count(model)) {
        profile_ = model;
        return true;
    }
    for (const auto& [name, table] : profiles_)
        if (name != "cpu" && model.find(name) != std::string::npos) {
            profile_ = name;
            return true;
        }
    std::string known;
    for (const auto& [name, table] : profiles_) known += (known.empty() ? "" : ", ") + name;
    return fail(err, "no floors for '" + model + "'; known: " + (known.empty() ? "(none)" : known));
}

bool Thresholds::load_config(const std::string& text, std::string* err) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail(err, "config: expected a JSON object");
    if (j.contains("floors") && j["floors"].is_object() && !load_floors(j["floors"].dump(), err)) return false;
    if (j.contains("profile") && j["profile"].is_string() && !select(j["profile"].get<std::string>(), err))
        return false;
    if (j.contains("thresholds")) {
        if (!j["thresholds"].is_object()) return fail(err, "config: 'thresholds' must be an object");
        for (const auto& [check, v] : j["thresholds"].items()) {
            if (!v.is_number()) return fail(err, "config: thresholds." + check + " is not a number");
            overrides_[check] = v.get<double>();
        }
    }
    return true;
}

bool Thresholds::set_override(const std::string& a, std::string* err) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) return fail(err, "--threshold: expected NAME=VALUE, got '" + a + "'");
    const std::string value = a.substr(eq + 1);
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') return fail(err, "--threshold " + a.substr(0, eq) + ": not a number");
    overrides_[a.substr(0, eq)] = v;
    return true;
}

std::optional<double> Thresholds::get(const std::string& check) const {
    if (auto it = overrides_.find(check); it != overrides_.end()) return it->second;
    auto p = profiles_.find(profile_);
    if (p == profiles_.end()) return std::nullopt;
    if (auto it = p->second.find(check); it != p->second.end()) return it->second;
    return std::nullopt;
}

}  // namespace kiln::smoke
