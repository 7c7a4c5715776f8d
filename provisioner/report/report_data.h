// What `kiln report` shows, gathered from the fleet and the journal: each
// node's state, its stage results over time, and the records its smoke and
// handover stages published (read typed: smoke_record.h, handover_record.h).
// Kept apart from the HTML so the page can be tested on data made by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/smoke_record.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/journal/store.h"

namespace kiln::report {

struct NodeReport {
    std::string name;
    std::string rack;
    std::string state = "pending";  // journal node state
    std::string detail;
    std::string stage;
    std::string error;
    std::vector<journal::StageRecord> stages;  // oldest first
    std::optional<smoke::SmokeRecord> smoke;   // the newest "smoke.result" record
    std::string handover;                      // the newest "handover" record's summary
    // The "warning" events of the node's newest run (a stage's observation
    // notes: an inventory part the BMC would not give, ...), oldest first;
    // and a record the journal holds that this kiln could not read.
    struct Warning {
        std::string stage;
        std::string text;
    };
    std::vector<Warning> warnings;
};

struct ReportData {
    std::string fleet;
    std::string fleet_path;
    int64_t generated_ms = 0;
    std::vector<journal::RunSummary> runs;  // oldest first
    std::vector<NodeReport> nodes;          // fleet order
};

// `store` may be null (no journal yet): every node pending, nothing run.
// `max_runs` limits the timeline to the newest runs (0 = all).
Result<ReportData> collect_report(const config::Fleet& fleet, journal::Store* store, int max_runs);

}  // namespace kiln::report
