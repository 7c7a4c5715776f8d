// Loads and validates fleet.toml (and the pipelines its roles name).
// Validation is complete before anything runs: every problem is reported,
// each as FILE:LINE:COL: KEY: what was expected.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::config {

// The top-level keys and node keys the core loader reads itself: a stage
// module may register neither as its table or node key
// (StageRegistry::add_table refuses them).
inline const std::set<std::string> kCoreTableKeys = {"schema",  "fleet",   "limits", "switches", "racks",
                                                     "cabling", "uplinks", "store",  "defaults", "nodes"};
inline const std::set<std::string> kCoreNodeKeys = {"name",   "rack", "role", "bmc",
                                                    "labels", "nics", "host", "libvirt_uri"};

struct LoadOptions {
    // Stage names a pipeline may list (implemented or not).
    std::set<std::string> known_stages;
    // Used when the fleet names no [fleet].pipelines and has no pipelines/
    // folder beside it.
    std::string default_pipelines_dir;
    // --pipelines DIR: wins over everything.
    std::string pipelines_dir_override;
    // The top-level tables stage modules own, with their readers
    // (StageRegistry::load_options). A table not listed is an unknown key.
    std::vector<ConfigTable> tables;
};

struct LoadResult {
    std::optional<Fleet> fleet;  // set only when errors is empty
    std::vector<Diagnostic> errors;
};

LoadResult load_fleet(const std::string& path, const LoadOptions& options);

// One pipeline file; errors appended to `errors`.
std::optional<Pipeline> load_pipeline(const std::string& path, const std::set<std::string>& known_stages,
                                      std::vector<Diagnostic>& errors);

// Parses "90s", "15m", "2h", "500ms", "1d" (and a bare integer of seconds).
std::optional<Duration> parse_duration(const std::string& text);

}  // namespace kiln::config
