// `kiln report FLEET --html OUT`: one self-contained HTML page from the
// journal (node states, a Gantt chart of stages, smoke figures against
// thresholds, failures). Reads only; changes nothing.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "provisioner/engine/stage_registry.h"

namespace kiln::cli {

struct ReportArgs {
    std::string fleet;
    std::string html;      // output file ("-" = stdout)
    int runs = 20;         // newest runs on the timeline (0 = all)
};

CLI::App* add_report_command(CLI::App& app, ReportArgs& args);
// `journal` and `pipelines`: the global --journal and --pipelines ("" = default).
int cmd_report(const ReportArgs& args, const std::string& journal, const std::string& pipelines,
               const engine::StageRegistry& registry);

}  // namespace kiln::cli
