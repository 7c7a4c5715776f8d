// What an emulated BMC has changed, kept on disk so the BMC survives its own
// restart: the resources that differ from the mockup, whole. Each write goes
// to a temp file in the same folder, is fsync'd and renamed over the old one,
// so a crash leaves the old state or the new, never half of one.
// Sessions are not kept (see session_table.h).
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::bmc {

struct StateSnapshot {
    std::string mockup;                               // the tree it was made over
    std::map<std::string, nlohmann::json> resources;  // URI -> whole body
    // What the emulator keeps besides resources: update tasks, staged
    // updates, the last boot (an object; empty in files from before).
    nlohmann::json emulator = nlohmann::json::object();
};

// nullopt when `path` does not exist. Errors: "bmc.state_unreadable",
// "bmc.state_malformed" (a broken file is refused, not silently reset).
Result<std::optional<StateSnapshot>> load_state_file(const std::string& path);

// Errors: "bmc.state_write_failed".
Status write_state_file(const std::string& path, const StateSnapshot& snapshot);

}  // namespace kiln::bmc
