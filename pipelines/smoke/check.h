// One smoke check's result, as kiln-smoke prints it and the smoke stage
// reads it back: a figure, the threshold it was held against, its unit and
// the verdict. `compare` says which way is good (">=": a floor, "<=": a
// ceiling), so the stage can re-judge a figure against the fleet's own
// thresholds without knowing every check.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::smoke {

enum class Verdict { Pass, Fail, Skip };

const char* verdict_name(Verdict v);
std::optional<Verdict> parse_verdict(const std::string& s);

struct Check {
    std::string name;  // "allreduce_busbw_gbps"
    double figure = 0;
    std::optional<double> threshold;  // none: nothing to hold it against (informational pass)
    std::string unit;                 // "GB/s", "GFLOP/s", "fraction", "count"
    std::string compare = ">=";       // ">=" floor, "<=" ceiling
    Verdict verdict = Verdict::Skip;
    std::string detail;  // why it failed or was skipped; extra facts

    // Sets the verdict from figure and threshold; a check already marked
    // failed (an error, a timeout) stays failed.
    void judge();
};

// The document kiln-smoke prints.
struct Report {
    std::string host;
    std::string backend = "cpu";  // cpu | cuda
    int rank = 0;
    int ranks = 1;
    std::vector<Check> checks;
    // The GPU path's NVML state (gpu_state_json); null elsewhere.
    nlohmann::json nvml;
    // The RDMA checks' pairs (rdma_checks.h); null where they did not run.
    nlohmann::json rdma;

    // Fail when any check failed; skips do not fail a run.
    Verdict verdict() const;
};

}  // namespace kiln::smoke
