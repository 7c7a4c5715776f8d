// Before the journal kept stage records (SQLite journal schema 2,
// PostgreSQL schema 6), the smoke and handover stages kept their last
// result per node in <fleet dir>/.kiln/<stage>/<node>.json. Where the
// journal has no record of a node yet, those stages read that file, so a
// fleet converged before the upgrade stays converged. Nothing writes these
// files any more.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::journal {

// <fleet_dir>/.kiln/<stage>/<node>.json
std::string legacy_state_path(const std::string& fleet_dir, const std::string& stage, const std::string& node);
// That file as a JSON object; nullopt when there is none or it does not
// parse (then the stage runs again).
std::optional<nlohmann::json> read_legacy_state(const std::string& fleet_dir, const std::string& stage,
                                                const std::string& node);

}  // namespace kiln::journal
