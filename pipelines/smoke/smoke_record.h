// The smoke stage's result as it publishes it in the journal (record kind
// "smoke.result", schema 1): what its own observe and verify read, what
// handover hands on, what the evidence bundle packs and what `kiln report`
// shows. The body is the result document the stage builds:
//
// {"node", "input_hash", "verdict": "pass"|"fail", "ts_ms", "transport",
//  "failed": [{"vm","name","figure","threshold","unit","compare","detail","relative"}],
//  "thresholds": {CHECK: number}, "vms": [{"vm","rank","exit_code","error","report"}],
//  "ring", "relative", "warnings", "localisation"}
//
// SmokeRecord is its typed reading: the fields readers use, checked for
// their types, and the whole document beside them for those that keep it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"
#include "provisioner/engine/stage.h"
#include "provisioner/journal/store.h"

namespace kiln::smoke {

inline constexpr const char* kResultKind = "smoke.result";
inline constexpr int kResultSchema = 1;

// One check of one VM: as a rank reported it, or as the stage failed it.
struct CheckFigure {
    std::string vm;
    std::string name;
    std::optional<double> figure;
    std::optional<double> threshold;
    std::string unit;
    std::string compare = ">=";  // ">=": a floor; "<=": a ceiling
    std::string verdict;         // pass | fail | skip ("" in a failed entry: it failed)
    std::string detail;
    std::optional<double> relative;  // a relative verdict: of the ring's median
};

struct VmResult {
    std::string vm;
    std::string error;  // why there is no report ("" with one)
    bool has_report = false;
    std::vector<CheckFigure> checks;
};

struct SmokeRecord {
    std::string node;
    std::string input_hash;
    std::string verdict;  // pass | fail
    int64_t ts_ms = 0;
    std::vector<CheckFigure> failed;
    std::map<std::string, double> thresholds;  // the fleet's, held against
    std::vector<VmResult> vms;
    nlohmann::json document;  // the whole body, as published
    bool passed() const { return verdict == "pass"; }
};

// Reads a published body. A schema this kiln does not know, or a field of
// the wrong type, is an error ("smoke.record") naming the node and field.
Result<SmokeRecord> read_smoke_record(const nlohmann::json& body, int schema, const std::string& node);
// The same from the journal's row (its body is JSON text).
Result<SmokeRecord> read_smoke_record(const journal::NodeRecord& record);

// The node's current result, for a stage (the smoke stage itself, and
// handover): its newest record in the journal, else the file an older kiln
// kept (journal/legacy_state.h; one that does not read counts as none).
// nullopt: no result.
Result<std::optional<SmokeRecord>> latest_smoke_result(const engine::StageContext& ctx);

// "vm0 cpu_gemm_gflops 12.3 < 1e+09 GFLOP/s; ..." from a result's "failed".
std::string describe_failures(const nlohmann::json& result);

}  // namespace kiln::smoke
