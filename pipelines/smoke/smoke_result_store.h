// The smoke stage's last result per node, kept beside the journal
// (<fleet dir>/.kiln/smoke/<node>.json): what observe reads, what handover
// hands on, and what `kiln report` shows. The same document is journaled as
// the "smoke.result" event of the stage.
//
// {"node", "input_hash", "verdict": "pass"|"fail", "ts_ms",
//  "failed": [{"vm","name","figure","threshold","unit","compare","detail"}],
//  "thresholds": {CHECK: number}, "vms": [{"vm","rank","exit_code","report"}]}
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"

namespace kiln::smoke {

// "" state_dir = the default beside the fleet's journal.
std::string smoke_state_dir(const config::Fleet& fleet, const std::string& state_dir);

Status save_result(const std::string& dir, const std::string& node, const nlohmann::json& result);
// nullopt when there is none (or it is unreadable: then the stage runs again).
std::optional<nlohmann::json> load_result(const std::string& dir, const std::string& node);

// "vm0 cpu_gemm_gflops 12.3 < 1e+09 GFLOP/s; ..." from a result's "failed".
std::string describe_failures(const nlohmann::json& result);

}  // namespace kiln::smoke
