#include "provisioner/report/html_report.h"

#include <algorithm>
#include <ctime>
#include <map>

#include <fmt/format.h>

#include "provisioner/report/html_escape.h"

namespace kiln::report {

namespace {

std::string esc(std::string_view s) {
    return escape_html(s);
}

std::string utc(int64_t ms) {
    if (ms <= 0) return "-";
    auto secs = static_cast<time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
    return buf;
}

std::string duration(int64_t ms) {
    if (ms < 1000) return fmt::format("{} ms", ms);
    if (ms < 120000) return fmt::format("{:.1f} s", ms / 1000.0);
    return fmt::format("{}m{:02}s", ms / 60000, (ms / 1000) % 60);
}

const char* outcome_color(const std::string& outcome) {
    if (outcome == "verified") return "#2e9e5b";
    if (outcome == "skipped") return "#a9b1ba";
    if (outcome == "quarantined") return "#e08a1e";
    if (outcome == "failed") return "#d64545";
    if (outcome == "timed_out") return "#9b3fb5";
    return "#6b7785";  // interrupted, anything new
}

const char* state_class(const std::string& state) {
    if (state == "ready") return "ok";
    if (state == "quarantined") return "warn";
    if (state == "failed") return "bad";
    return "idle";
}

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2329;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2e7;padding-bottom:4px}
.meta{color:#5c6670}table{border-collapse:collapse;margin:4px 0 12px}
th,td{border:1px solid #dde2e7;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f5f7}
.badge{display:inline-block;padding:0 8px;border-radius:9px;color:#fff;font-weight:600}
.ok{background:#2e9e5b}.warn{background:#e08a1e}.bad{background:#d64545}.idle{background:#6b7785}
.pass{color:#1f7a45;font-weight:600}.fail{color:#c03030;font-weight:600}.skip{color:#6b7785}
.num{text-align:right;font-variant-numeric:tabular-nums}.ratio{white-space:nowrap}.err{color:#a02525}
svg text{font:12px system-ui,sans-serif}
)css";

void node_table(std::string& h, const ReportData& d) {
    std::map<std::string, int> counts;
    for (const auto& n : d.nodes) ++counts[n.state];
    std::string summary;
    for (const auto& [s, c] : counts) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", c, esc(s));
    h += "<h2 id=\"nodes\">Nodes</h2>\n<p>" + summary + "</p>\n";
    h += "<table class=\"nodes\"><tr><th>node</th><th>rack</th><th>state</th><th>stage</th><th>detail</th>"
         "<th>handover</th></tr>\n";
    for (const auto& n : d.nodes)
        h += fmt::format(
            "<tr class=\"node\" data-node=\"{0}\"><td>{0}</td><td>{1}</td><td><span class=\"badge {2}\">{3}</span></td>"
            "<td>{4}</td><td{5}>{6}</td><td>{7}</td></tr>\n",
            esc(n.name), esc(n.rack), state_class(n.state), esc(n.state), esc(n.stage),
            n.error.empty() ? "" : " class=\"err\"", esc(n.error.empty() ? n.detail : n.error), esc(n.handover));
    h += "</table>\n";
}

void gantt(std::string& h, const ReportData& d) {
    h += "<h2 id=\"timeline\">Timeline</h2>\n";
    int64_t t0 = 0, t1 = 0;
    for (const auto& n : d.nodes)
        for (const auto& s : n.stages) {
            int64_t end = std::max(s.ended_ms, s.started_ms);
            t0 = t0 == 0 ? s.started_ms : std::min(t0, s.started_ms);
            t1 = std::max(t1, end);
        }
    if (t0 == 0) {
        h += "<p class=\"meta\">No stage has run yet.</p>\n";
        return;
    }
    const int label_w = 170, plot_w = 820, row_h = 26, top = 28;
    const int height = top + row_h * static_cast<int>(d.nodes.size()) + 10;
    const double span = static_cast<double>(std::max<int64_t>(t1 - t0, 1));
    h += fmt::format("<p class=\"meta\">{} to {} ({}), {} run{}.</p>\n", utc(t0), utc(t1), duration(t1 - t0),
                     d.runs.size(), d.runs.size() == 1 ? "" : "s");
    h += fmt::format(
        "<svg class=\"gantt\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
        "role=\"img\" aria-label=\"stage timeline per node\">\n",
        label_w + plot_w + 50, height, label_w + plot_w + 50, height);
    for (int i = 0; i <= 5; ++i) {
        const double x = label_w + plot_w * i / 5.0;
        h += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e3e7eb\"/>"
            "<text x=\"{0:.1f}\" y=\"16\" text-anchor=\"middle\" fill=\"#5c6670\">+{3}</text>\n",
            x, top - 6, height - 6, duration(static_cast<int64_t>(span * i / 5)));
    }
    for (size_t row = 0; row < d.nodes.size(); ++row) {
        const auto& n = d.nodes[row];
        const int y = top + row_h * static_cast<int>(row);
        h += fmt::format("<text x=\"4\" y=\"{}\" fill=\"#1d2329\">{}</text>\n", y + 17, esc(n.name));
        for (const auto& s : n.stages) {
            const int64_t end = std::max(s.ended_ms, s.started_ms);
            const double x = label_w + plot_w * (s.started_ms - t0) / span;
            const double w = std::max(2.0, plot_w * (end - s.started_ms) / span);
            h += fmt::format(
                "<g class=\"bar\" data-node=\"{0}\" data-stage=\"{1}\" data-outcome=\"{2}\"><rect x=\"{3:.1f}\" "
                "y=\"{4}\" width=\"{5:.1f}\" height=\"{6}\" rx=\"3\" fill=\"{7}\"><title>{0} {1}: {2}, {8} (run "
                "{9}){10}</title></rect>",
                esc(n.name), esc(s.stage), esc(s.outcome), x, y + 4, w, row_h - 8, outcome_color(s.outcome),
                duration(end - s.started_ms), s.run_id, s.error.empty() ? "" : " — " + esc(s.error));
            if (w > 8.0 * static_cast<double>(s.stage.size()) + 6)
                h += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#fff\">{}</text>", x + 4, y + 18, esc(s.stage));
            h += "</g>\n";
        }
    }
    h += "</svg>\n<p class=\"meta\">";
    for (const char* o : {"verified", "skipped", "failed", "quarantined", "timed_out", "interrupted"})
        h += fmt::format(
            "<svg width=\"12\" height=\"12\"><rect width=\"12\" height=\"12\" rx=\"2\" fill=\"{}\"/></svg> "
            "{} &nbsp; ",
            outcome_color(o), o);
    h += "</p>\n";
}

std::string number(const std::optional<double>& v) {
    return v ? fmt::format("{:.4g}", *v) : "-";
}

void smoke(std::string& h, const ReportData& d) {
    h += "<h2 id=\"smoke\">Smoke figures</h2>\n";
    bool any = false;
    for (const auto& n : d.nodes) {
        if (!n.smoke) continue;
        any = true;
        const kiln::smoke::SmokeRecord& r = *n.smoke;
        h += fmt::format("<h3>{} <span class=\"{}\">{}</span></h3>\n", esc(n.name), r.passed() ? "pass" : "fail",
                         esc(r.verdict));
        h += "<table class=\"smoke\"><tr><th>VM</th><th>check</th><th>figure</th><th>threshold</th><th>unit</th>"
             "<th>against threshold</th><th>verdict</th><th>detail</th></tr>\n";
        for (const auto& vm : r.vms) {
            if (!vm.has_report) {
                h += fmt::format("<tr><td>{}</td><td colspan=\"7\" class=\"err\">{}</td></tr>\n", esc(vm.vm),
                                 esc(vm.error.empty() ? "no report" : vm.error));
                continue;
            }
            for (const auto& c : vm.checks) {
                // The fleet's threshold, where one is set, is the one held against.
                std::optional<double> threshold = c.threshold;
                if (auto it = r.thresholds.find(c.name); it != r.thresholds.end()) threshold = it->second;
                std::string v = c.verdict;
                for (const auto& f : r.failed)
                    if (f.vm == vm.vm && f.name == c.name) v = "fail";
                std::string bar;
                if (c.figure && threshold && *threshold > 0) {
                    const double ratio = std::min(2.0, *c.figure / *threshold);
                    bar = fmt::format(
                        "<svg width=\"120\" height=\"12\"><rect width=\"120\" height=\"12\" fill=\"#eef1f4\"/>"
                        "<rect width=\"{:.1f}\" height=\"12\" fill=\"{}\"/><line x1=\"60\" x2=\"60\" "
                        "y1=\"0\" y2=\"12\" stroke=\"#1d2329\"/></svg> {:.3g}x",
                        60 * ratio, v == "fail" ? "#d64545" : "#2e9e5b", *c.figure / *threshold);
                }
                h += fmt::format(
                    "<tr class=\"check\" data-check=\"{1}\"><td>{0}</td><td>{1}</td><td class=\"num\">{2}</td>"
                    "<td class=\"num\">{3} {4}</td><td>{5}</td><td class=\"ratio\">{6}</td><td "
                    "class=\"{7}\">{7}</td><td>{8}</td></tr>\n",
                    esc(vm.vm), esc(c.name), number(c.figure), esc(c.compare), number(threshold), esc(c.unit), bar,
                    esc(v), esc(c.detail));
            }
        }
        h += "</table>\n";
    }
    if (!any) h += "<p class=\"meta\">No smoke results in the journal.</p>\n";
}

void failures(std::string& h, const ReportData& d) {
    h += "<h2 id=\"failures\">Failures</h2>\n";
    std::string rows;
    for (const auto& n : d.nodes)
        for (const auto& s : n.stages)
            if (!s.error.empty())
                rows += fmt::format(
                    "<tr class=\"failure\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td "
                    "class=\"err\">{}</td></tr>\n",
                    esc(n.name), esc(s.stage), esc(s.outcome), utc(s.ended_ms), esc(s.error));
    if (rows.empty()) {
        h += "<p class=\"meta\">None.</p>\n";
        return;
    }
    h +=
        "<table class=\"failures\"><tr><th>node</th><th>stage</th><th>outcome</th><th>when</th><th>reason</th></tr>\n" +
        rows + "</table>\n";
}

// What the newest run saw but did not count as a failure (inventory parts a
// BMC would not give, ...): a node can be ready and still worth a look.
void warnings(std::string& h, const ReportData& d) {
    std::string rows;
    for (const auto& n : d.nodes)
        for (const auto& w : n.warnings)
            rows += fmt::format("<tr class=\"warning\"><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(n.name),
                                esc(w.stage), esc(w.text));
    if (rows.empty()) return;
    h += "<h2 id=\"warnings\">Warnings</h2>\n<table "
         "class=\"warnings\"><tr><th>node</th><th>stage</th><th>warning</th></tr>\n" +
         rows + "</table>\n";
}

}  // namespace

std::string render_html(const ReportData& d) {
    std::string h;
    h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
    h +=
        "<title>kiln report: " + esc(d.fleet) + "</title>\n<style>" + std::string(kStyle) + "</style></head>\n<body>\n";
    h += "<h1>kiln report: " + esc(d.fleet) + "</h1>\n";
    h += fmt::format("<p class=\"meta\">{} &middot; generated {} &middot; {} node{}</p>\n", esc(d.fleet_path),
                     utc(d.generated_ms), d.nodes.size(), d.nodes.size() == 1 ? "" : "s");
    node_table(h, d);
    gantt(h, d);
    smoke(h, d);
    failures(h, d);
    warnings(h, d);
    h += "</body></html>\n";
    return h;
}

}  // namespace kiln::report
