// `kiln report`'s page: one self-contained HTML document (inline CSS and
// SVG, no scripts, no external assets) with the node table, a Gantt chart
// of every node's stages, the smoke figures against their thresholds, and
// the failures with their reasons. Every journal string is escaped.
#pragma once

#include <string>

#include "provisioner/report/report_data.h"

namespace kiln::report {

std::string render_html(const ReportData& data);

}  // namespace kiln::report
