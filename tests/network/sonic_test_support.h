// Shared by the SONiC apply tests: the stock fixture, the validator, and a
// runner that executes the switch's commands in kiln-sonic-sim locally.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "network/sonic/yang_validator.h"
#include "provisioner/core/command.h"

namespace kiln::test::network {

inline nlohmann::json stock_config() {
    std::ifstream in(std::string(KILN_NETWORK_FIXTURES) + "/sonic_stock_4port.json");
    return nlohmann::json::parse(in);
}

inline void write_json(const std::string& path, const nlohmann::json& doc) {
    std::ofstream(path) << doc.dump(4) << "\n";
}

// A switch's state as kiln-sonic-sim keeps it: the stock CONFIG_DB and the
// SKU files under device/ (what a real switch has under /usr/share/sonic/device).
inline void seed_state(const std::string& dir) {
    write_json(dir + "/config_db.json", stock_config());
    std::filesystem::remove_all(dir + "/device");
    std::filesystem::copy(std::string(KILN_NETWORK_FIXTURES) + "/sonic-device", dir + "/device",
                          std::filesystem::copy_options::recursive);
}

inline nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

inline std::vector<std::string> checkpoints_in(const std::string& state_dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state_dir + "/checkpoints", ec))
        out.push_back(e.path().filename().string());
    return out;
}

}  // namespace kiln::test::network
