// `kiln report FLEET --html OUT`: one self-contained HTML page from the
// journal (node states, a Gantt chart of stages, smoke figures against
// thresholds, failures). Reads only; changes nothing.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/engine/stage_registry.h"
#include "provisioner/journal/store.h"

namespace kiln::cli {

struct ReportArgs {
    std::string fleet;
    std::string html;  // output file ("-" = stdout)
    int runs = 20;     // newest runs on the timeline (0 = all)
};

CLI::App* add_report_command(CLI::App& app, ReportArgs& args);
// Opens the fleet's journal to read (the global --journal/--store); null when
// there is none yet.
using JournalReader = std::function<Result<std::unique_ptr<journal::Store>>(const config::Fleet&)>;
// `pipelines`: the global --pipelines ("" = default).
int cmd_report(const ReportArgs& args, const JournalReader& open_journal, const std::string& pipelines,
               const engine::StageRegistry& registry);

}  // namespace kiln::cli
