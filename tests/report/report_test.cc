// `kiln report`: the page from a journal that a real test run produced (the
// smoke and handover stages with kiln-smoke ranks on loopback), its
// structure, its escaping, and that headless Chromium renders it to a PNG
// that is not blank.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "provisioner/core/command.h"
#include "provisioner/report/html_escape.h"
#include "provisioner/report/html_report.h"
#include "provisioner/report/report_data.h"
#include "tests/report/png_probe.h"
#include "tests/smoke/smoke_harness.h"

using kiln::report::collect_report;
using kiln::report::render_html;
using kiln::test::SmokeHarness;

namespace {

size_t count(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
    return n;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Nothing that loads from elsewhere, and no script.
void check_self_contained(const std::string& html) {
    CHECK(html.find("<script") == std::string::npos);
    // Attributes need a quote, which text never keeps unescaped.
    CHECK(html.find("src=\"") == std::string::npos);
    CHECK(html.find("href=\"") == std::string::npos);
    for (const char* tag : {"<img", "<link", "<iframe", "<object", "<embed"})
        CHECK(html.find(tag) == std::string::npos);
    CHECK(html.find("url(") == std::string::npos);
    CHECK(html.find("@import") == std::string::npos);
    // The only URL is SVG's namespace name, which nothing fetches.
    std::regex url("https?://[^\"]*");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator(); ++it)
        CHECK(it->str() == "http://www.w3.org/2000/svg");
}

}  // namespace

TEST_CASE("escape_html escapes the five special characters") {
    CHECK(kiln::report::escape_html(R"(<a href="x">Tom & 'Jerry'</a>)") ==
          "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
}

TEST_CASE("the report of a journal from a real run: timeline smoke figures failures and a Chromium render") {
    // n001 passes and is handed over; n002's floor is impossible: quarantined.
    SmokeHarness h({{"allreduce_busbw_gbps", 0.0}, {"loss_drop_fraction", 0.2}}, 2);
    h.set_profile("n002", "strict", {{"cpu_gemm_gflops", 1e15}});
    auto run = h.run();
    REQUIRE(run.nodes.size() == 2);
    REQUIRE(run.nodes[0].state == kiln::engine::NodeState::Ready);
    REQUIRE(run.nodes[1].state == kiln::engine::NodeState::Quarantined);

    auto data = collect_report(h.fleet, h.store.get(), 0);
    REQUIRE(data.ok());
    REQUIRE(data->nodes.size() == 2);
    CHECK(data->nodes[0].stages.size() == 2);  // smoke, handover
    CHECK(data->nodes[1].stages.size() == 1);  // smoke, quarantined
    // The stages' records, read typed.
    REQUIRE(data->nodes[0].smoke);
    CHECK(data->nodes[0].smoke->passed());
    CHECK(data->nodes[0].handover.rfind("ready; handover command /usr/bin/tee", 0) == 0);
    CHECK(data->nodes[0].handover.find(": exit 0") != std::string::npos);
    REQUIRE(data->nodes[1].smoke);
    CHECK(data->nodes[1].smoke->verdict == "fail");
    REQUIRE(data->nodes[1].smoke->failed.size() == 2);
    CHECK(data->nodes[1].smoke->failed[0].threshold == 1e15);
    CHECK(data->nodes[1].handover.rfind("quarantined: kiln-n002-vm0 cpu_gemm_gflops", 0) == 0);
    const std::string html = render_html(*data);

    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(count(html, "<svg class=\"gantt\"") == 1);
    CHECK(count(html, "<g class=\"bar\"") == 3);
    CHECK(count(html, "data-node=\"n001\" data-stage=\"handover\" data-outcome=\"verified\"") == 1);
    CHECK(count(html, "data-node=\"n002\" data-stage=\"smoke\" data-outcome=\"quarantined\"") == 1);
    // Smoke figures: every check of both VMs of both nodes.
    CHECK(count(html, "<tr class=\"check\" data-check=\"cpu_gemm_gflops\"") == 4);
    CHECK(count(html, "<tr class=\"check\" data-check=\"allreduce_errors\"") == 4);
    // The impossible floor shows as the fleet's threshold and a failure.
    CHECK(html.find("&gt;= 1e+15") != std::string::npos);
    CHECK(count(html, "<tr class=\"failure\">") == 1);
    CHECK(html.find("failed checks: kiln-n002-vm0 cpu_gemm_gflops") != std::string::npos);
    CHECK(html.find("badge warn\">quarantined") != std::string::npos);
    CHECK(html.find("badge ok\">ready") != std::string::npos);
    check_self_contained(html);

    const std::string page = h.dir.write("report.html", html);
    const std::string png = h.dir.file("report.png");
    kiln::CommandSpec spec;
    spec.argv = {"chromium",
                 "--headless",
                 "--no-sandbox",
                 "--disable-gpu",
                 "--disable-background-networking",
                 "--disable-component-update",
                 "--disable-sync",
                 "--no-first-run",
                 "--user-data-dir=" + h.dir.file("chromium-profile"),
                 "--window-size=1100,1400",
                 "--screenshot=" + png,
                 "file://" + page};
    spec.timeout = std::chrono::seconds(120);
    spec.env["HOME"] = h.dir.path();
    auto r = kiln::ProcessRunner().run(spec);
    REQUIRE(r.ok());
    INFO("chromium stderr: " << r->err.substr(0, 2000));
    REQUIRE(std::filesystem::exists(png));
    auto probe = kiln::test::probe_png(slurp(png));
    INFO(probe.error);
    REQUIRE(probe.ok);
    CHECK(probe.width == 1100);
    // A blank page is one colour; the rendered report has text, bars and badges.
    CHECK(probe.differing > uint64_t(probe.width) * probe.height / 100);
    if (const char* keep = std::getenv("KILN_REPORT_SCREENSHOT")) {
        std::filesystem::copy_file(png, keep, std::filesystem::copy_options::overwrite_existing);
        std::filesystem::copy_file(page, std::string(keep) + ".html",
                                   std::filesystem::copy_options::overwrite_existing);
    }
}

TEST_CASE("a record the report cannot read is shown as a warning of its node, the rest of the report stands") {
    SmokeHarness h({{"allreduce_errors", 0}});
    auto run = h.run();
    REQUIRE(run.nodes[0].state == kiln::engine::NodeState::Ready);
    auto later = h.store->begin_run({"apply", "f", "", "test"});
    REQUIRE(later.ok());
    REQUIRE(h.store->put_record({*later, "n001", "handover", "handover", 9, R"({"state":"ready"})", 0}));
    auto data = collect_report(h.fleet, h.store.get(), 0);
    REQUIRE(data.ok());
    const auto& n = data->nodes[0];
    CHECK(n.smoke);
    CHECK(n.handover.empty());
    REQUIRE(n.warnings.size() == 1);
    CHECK(n.warnings[0].stage == "handover");
    CHECK(n.warnings[0].text ==
          "the handover record of n001 in the journal: schema 9, this kiln reads 1 (written by another kiln version)");
}

TEST_CASE("journal text is escaped everywhere it appears") {
    kiln::report::ReportData d;
    d.fleet = "<b>fleet</b>";
    kiln::report::NodeReport n;
    n.name = "node\"><script>alert(1)</script>";
    n.state = "failed";
    n.error = "smoke: <img src=x onerror=alert(2)>";
    kiln::journal::StageRecord rec;
    rec.node = n.name;
    rec.stage = "smoke<i>";
    rec.outcome = "failed";
    rec.error = n.error;
    rec.started_ms = 1000;
    rec.ended_ms = 5000;
    n.stages.push_back(rec);
    auto smoke = kiln::smoke::read_smoke_record(nlohmann::json{{"verdict", "fail"},
                                                               {"vms",
                                                                {{{"vm", "vm'0"},
                                                                  {"report",
                                                                   {{"checks",
                                                                     {{{"name", "x<y"},
                                                                       {"figure", 1.0},
                                                                       {"threshold", 2.0},
                                                                       {"unit", "&"},
                                                                       {"verdict", "fail"},
                                                                       {"detail", "</td></tr><script>"}}}}}}}}}},
                                                kiln::smoke::kResultSchema, n.name);
    REQUIRE(smoke.ok());
    n.smoke = std::move(*smoke);
    n.warnings.push_back({"firmware", "inventory part not read: network_adapters: GET /x<script>: HTTP 404"});
    d.nodes.push_back(n);
    const std::string html = render_html(d);
    check_self_contained(html);
    CHECK(html.find("<h2 id=\"warnings\">") != std::string::npos);
    CHECK(html.find("network_adapters: GET /x&lt;script&gt;: HTTP 404") != std::string::npos);
    CHECK(html.find("<b>fleet") == std::string::npos);
    CHECK(html.find("&lt;b&gt;fleet&lt;/b&gt;") != std::string::npos);
    CHECK(html.find("node&quot;&gt;&lt;script&gt;") != std::string::npos);
    CHECK(html.find("<img") == std::string::npos);
    CHECK(html.find("smoke&lt;i&gt;") != std::string::npos);
    CHECK(html.find("vm&#39;0") != std::string::npos);
}
