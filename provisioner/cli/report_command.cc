#include "provisioner/cli/report_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/report/html_report.h"
#include "provisioner/report/report_data.h"

namespace kiln::cli {

namespace fs = std::filesystem;

CLI::App* add_report_command(CLI::App& app, ReportArgs& args) {
    auto* report = app.add_subcommand("report", "write the journal as one self-contained HTML page");
    report->add_option("FLEET", args.fleet, "fleet config (TOML)")->required();
    report->add_option("--html", args.html, "the HTML file to write ('-' for stdout)")->required();
    report->add_option("--runs", args.runs, "newest runs on the timeline (0 = all)")->capture_default_str();
    return report;
}

int cmd_report(const ReportArgs& args, const JournalReader& open_journal, const std::string& pipelines,
               const engine::StageRegistry& registry) {
    config::LoadOptions opts = registry.load_options();
    opts.default_pipelines_dir = KILN_DEFAULT_PIPELINES_DIR;
    opts.pipelines_dir_override = pipelines;
    auto loaded = config::load_fleet(args.fleet, opts);
    if (!loaded.fleet) {
        for (const auto& d : loaded.errors) std::fprintf(stderr, "%s\n", d.str().c_str());
        return 1;
    }
    const auto& fleet = *loaded.fleet;
    auto opened = open_journal(fleet);
    if (!opened) {
        std::fprintf(stderr, "kiln: %s\n", opened.error().str().c_str());
        return 1;
    }
    std::unique_ptr<journal::Store> store = std::move(*opened);
    auto data = report::collect_report(fleet, store.get(), args.runs);
    if (!data) {
        std::fprintf(stderr, "kiln: %s\n", data.error().str().c_str());
        return 1;
    }
    const std::string html = report::render_html(*data);
    if (args.html == "-") {
        std::fwrite(html.data(), 1, html.size(), stdout);
        return 0;
    }
    // Written beside, then renamed: a reader never sees half a page.
    const std::string tmp = args.html + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << html;
        if (!out) {
            std::fprintf(stderr, "kiln: report: cannot write %s\n", tmp.c_str());
            return 1;
        }
    }
    std::error_code ec;
    fs::rename(tmp, args.html, ec);
    if (ec) {
        std::fprintf(stderr, "kiln: report: cannot write %s: %s\n", args.html.c_str(), ec.message().c_str());
        return 1;
    }
    std::printf("%s: report of %zu node%s written\n", args.html.c_str(), data->nodes.size(),
                data->nodes.size() == 1 ? "" : "s");
    return 0;
}

}  // namespace kiln::cli
