// Per-model floors for kiln-smoke's checks. The defaults live in a data file
// (floors.json: a profile per GPU model, A100/H100/H200, and "cpu"); kiln
// overrides single values with --threshold NAME=VALUE or a --config file.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace kiln::smoke {

class Thresholds {
public:
    // Reads floors.json-shaped text: {"profiles": {"cpu": {"check": number, ...}, ...}}.
    bool load_floors(const std::string& text, std::string* err);
    // Chooses a profile: the exact name, else the first profile name the
    // model string contains ("NVIDIA H200 141GB HBM3e" -> "H200").
    bool select(const std::string& model_or_profile, std::string* err);
    // A --config file: {"profile": "cpu", "thresholds": {"check": number}}.
    bool load_config(const std::string& text, std::string* err);
    // "name=value".
    bool set_override(const std::string& assignment, std::string* err);

    std::optional<double> get(const std::string& check) const;
    const std::string& profile() const { return profile_; }
    const std::map<std::string, double>& overrides() const { return overrides_; }

private:
    std::map<std::string, std::map<std::string, double>> profiles_;
    std::string profile_;
    std::map<std::string, double> overrides_;
};

}  // namespace kiln::smoke
