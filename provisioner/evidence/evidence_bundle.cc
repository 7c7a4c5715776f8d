#include "provisioner/evidence/evidence_bundle.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "firmware/redfish/session_pool.h"
#include "firmware/stage/firmware_stage.h"
#include "pipelines/smoke/smoke_record.h"
#include "provisioner/core/sha256.h"
#include "provisioner/evidence/bmc_evidence.h"
#include "provisioner/evidence/secret_scrub.h"
#include "provisioner/handover/handover_record.h"
#include "provisioner/journal/legacy_state.h"
#include "provisioner/vm/node_vms.h"

namespace kiln::evidence {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxSerialBytes = 8u << 20;  // the tail of a console log that is kept

Error bundle_error(const std::string& code, const std::string& message) {
    return make_error("evidence", code, message);
}

std::string pretty(const json& j) {
    return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<std::string> read_tail(const fs::path& p, size_t max_bytes, bool* cut) {
    std::ifstream in(p, std::ios::binary | std::ios::ate);
    if (!in) return std::nullopt;
    const auto size = static_cast<size_t>(in.tellg());
    *cut = size > max_bytes;
    const size_t start = *cut ? size - max_bytes : 0;
    in.seekg(static_cast<std::streamoff>(start));
    std::string out(size - start, '\0');
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    return out;
}

// What goes into the archive, gathered before anything is written.
struct Contents {
    struct File {
        std::string path, text, source;
        int redactions = 0;
    };
    std::vector<File> files;
    json parts = json::array();

    void add(std::string path, std::string text, std::string source) {
        files.push_back({std::move(path), std::move(text), std::move(source)});
    }
    void included(const std::string& part) { parts.push_back({{"name", part}, {"status", "included"}}); }
    void unavailable(const std::string& part, const std::string& why) {
        parts.push_back({{"name", part}, {"status", "unavailable: " + why}});
    }
};

// GPU state as the guests reported it: a report's "nvml" member, or the GPU
// checks of a report from the CUDA backend. Nothing is made up for a node
// whose guests ran the CPU path.
json gpu_state(const json& smoke) {
    json out = json::array();
    for (const auto& vm : smoke.value("vms", json::array())) {
        if (!vm.is_object() || !vm.contains("report") || !vm["report"].is_object()) continue;
        const json& r = vm["report"];
        const bool cuda = r.value("backend", "") == "cuda";
        if (!cuda && !r.contains("nvml")) continue;
        json one = {{"vm", vm.value("vm", "")}, {"backend", r.value("backend", "")}};
        if (r.contains("nvml")) one["nvml"] = r["nvml"];
        json checks = json::array();
        for (const auto& c : r.value("checks", json::array())) {
            const std::string name = c.is_object() ? c.value("name", "") : "";
            for (const char* key : {"gpu", "nvml", "remap", "ecc", "xid", "retired", "clock", "pcie"})
                if (name.find(key) != std::string::npos) {
                    checks.push_back(c);
                    break;
                }
        }
        one["gpu_checks"] = checks;
        out.push_back(std::move(one));
    }
    return out;
}

// The newest record of `kind` for the node: from the journal, else the file
// an older kiln kept beside it. `source` says which; "" with `why` when none.
std::optional<json> published(const BundleRequest& rq, const char* kind, const std::string& legacy_stage,
                              std::string& source, std::string& why) {
    const auto& node = rq.node->name;
    if (rq.store) {
        auto rec = rq.store->latest_record(node, kind);
        if (!rec) {
            why = rec.error().message;
            return std::nullopt;
        }
        if (*rec) {
            auto body = json::parse((*rec)->body, nullptr, false);
            if (body.is_discarded() || !body.is_object()) {
                why = std::string("the ") + kind + " record of " + node + " in the journal is not a JSON object";
                return std::nullopt;
            }
            source = fmt::format("journal ({} record, run {}, schema {})", kind, (*rec)->run_id, (*rec)->schema);
            return body;
        }
    }
    if (auto legacy = journal::read_legacy_state(rq.fleet->dir, legacy_stage, node)) {
        source = journal::legacy_state_path(rq.fleet->dir, legacy_stage, node);
        return legacy;
    }
    why = std::string("no ") + kind + " record for " + node +
          (rq.store ? " in the journal" : " (no journal: " + rq.store_unavailable + ")");
    return std::nullopt;
}

void gather_smoke(const BundleRequest& rq, Contents& c) {
    const auto& node = rq.node->name;
    std::string source = "the quarantining run's smoke result", why;
    auto body = rq.smoke_result ? rq.smoke_result : published(rq, smoke::kResultKind, "smoke", source, why);
    std::optional<smoke::SmokeRecord> result;
    if (body) {
        if (auto r = smoke::read_smoke_record(*body, smoke::kResultSchema, node))
            result = std::move(*r);
        else
            why = r.error().message;
    }
    if (!result) {
        c.unavailable("smoke.failed_checks", why);
        c.unavailable("smoke.localisation", why);
        c.unavailable("gpu.nvml", why);
        return;
    }
    const json& doc = result->document;
    c.add("smoke/result.json", pretty(doc), source);
    c.add("smoke/failed_checks.json",
          pretty({{"verdict", result->verdict},
                  {"summary", smoke::describe_failures(doc)},
                  {"failed", doc.value("failed", json::array())}}),
          source + " (\"failed\")");
    c.included("smoke.failed_checks");
    if (doc.contains("localisation") && doc["localisation"].is_object()) {
        c.add("smoke/localisation.json", pretty(doc["localisation"]), source + " (\"localisation\")");
        c.included("smoke.localisation");
    } else {
        c.unavailable("smoke.localisation",
                      "no fault localisation ran for " + node + " (its ring is its own, or the shared ring passed)");
    }
    json gpus = gpu_state(doc);
    if (gpus.empty()) {
        c.unavailable("gpu.nvml", "the smoke result carries no GPU state (the guests ran the CPU path)");
    } else {
        c.add("gpu/nvml.json", pretty({{"vms", gpus}}), source + " (vms[].report)");
        c.included("gpu.nvml");
    }
}

void gather_handover(const BundleRequest& rq, Contents& c, std::string& state) {
    std::string source, why;
    auto body = published(rq, handover::kRecordKind, "handover", source, why);
    if (!body) {
        c.unavailable("handover", why);
        return;
    }
    auto rec = handover::read_handover_record(*body, handover::kRecordSchema, rq.node->name);
    if (!rec) {
        c.unavailable("handover", rec.error().message);
        return;
    }
    state = rec->state;
    c.add("handover/state.json", pretty(rec->to_json()), source);
    c.included("handover");
}

void gather_history(const BundleRequest& rq, Contents& c) {
    if (!rq.store) {
        c.unavailable("journal.history", rq.store_unavailable.empty() ? "no journal yet" : rq.store_unavailable);
        return;
    }
    auto h = rq.store->history(rq.node->name, rq.history_limit);
    if (!h) {
        c.unavailable("journal.history", h.error().message);
        return;
    }
    json arr = json::array();
    for (const auto& e : *h)
        arr.push_back({{"ts_ms", e.ts_ms},
                       {"run_id", e.run_id},
                       {"kind", e.kind},
                       {"stage", e.stage},
                       {"name", e.name},
                       {"text", e.text},
                       {"outcome", e.outcome},
                       {"error", e.error}});
    c.add("journal/history.json", pretty({{"node", rq.node->name}, {"entries", arr}}), "journal (kiln history)");
    c.included("journal.history");
}

void gather_serial(const BundleRequest& rq, Contents& c) {
    const auto& node = *rq.node;
    const std::string& uri = node.libvirt_uri;
    if (!uri.empty() && uri.find(":///") == std::string::npos) {
        c.unavailable("vm.serial",
                      "the VMs run on the remote hypervisor " + uri + "; their serial logs are on that host");
        return;
    }
    const fs::path dir = vm::node_vm_dir(*rq.fleet, node);
    std::error_code ec;
    std::vector<fs::path> logs;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const std::string suffix = ".serial.log";
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
            it->is_regular_file())
            logs.push_back(it->path());
    }
    std::sort(logs.begin(), logs.end());
    for (const auto& p : logs) {
        bool cut = false;
        auto text = read_tail(p, kMaxSerialBytes, &cut);
        if (!text) continue;
        c.add("vm/" + p.filename().string(), std::move(*text), p.string() + (cut ? " (last 8 MiB)" : ""));
    }
    if (logs.empty())
        c.unavailable("vm.serial", "no serial console log in " + dir.string());
    else
        c.included("vm.serial");
}

void gather_bmc(const BundleRequest& rq, Contents& c, SecretScrubber& scrub) {
    const auto& node = *rq.node;
    auto all_unavailable = [&](const std::string& why) {
        for (const char* part : {"bmc.log_services", "bmc.tasks", "bmc.parts", "bmc.firmware"})
            c.unavailable(part, why);
    };
    if (node.bmc.url.empty()) {
        all_unavailable("the fleet gives " + node.name + " no bmc.url");
        return;
    }
    auto ep = firmware::bmc_endpoint(node);
    if (!ep) {
        all_unavailable(ep.error().message);
        return;
    }
    auto http = rq.http ? rq.http : std::make_shared<net::CurlHttpClient>();
    redfish::SessionPool pool(*http, rq.bmc_options_given ? rq.bmc : bundle_bmc_options());
    auto session = pool.acquire(*ep);
    redfish::Client client(session, rq.wait ? rq.wait : redfish::sleeping_waiter());
    BmcEvidenceOptions opts;
    opts.system_uri = node.bmc.system;
    auto ev = collect_bmc_evidence(client, opts);
    // The live token, before the pool logs out: a BMC may echo it back.
    scrub.add(session->token_for_leak_check());
    if (!ev) {
        all_unavailable("cannot read the BMC at " + node.bmc.url + ": " + ev.error().message);
        return;
    }
    const std::string from = "redfish " + session->origin();
    std::set<std::string> names;  // two services with one last path segment must not share a file
    for (const auto& log : ev->logs) {
        std::string name = log.name;
        for (int i = 2; !names.insert(name).second; ++i) name = log.name + "-" + std::to_string(i);
        c.add("bmc/log_services/" + name + ".json", pretty(log.doc), from + " " + log.uri + "/Entries");
    }
    if (!ev->logs.empty()) c.included("bmc.log_services");
    if (!ev->tasks.is_null()) {
        c.add("bmc/tasks.json", pretty(ev->tasks), from + " TaskService/Tasks");
        c.included("bmc.tasks");
    }
    if (!ev->parts.is_null()) {
        c.add("bmc/parts.json", pretty(ev->parts), from + " Chassis (PCIeDevices, Assembly)");
        if (!ev->parts["chassis"].empty() || !ev->parts["pcie_devices"].empty()) c.included("bmc.parts");
    }
    if (!ev->firmware.is_null()) {
        c.add("bmc/firmware_inventory.json", pretty(ev->firmware), from + " UpdateService/FirmwareInventory");
        c.included("bmc.firmware");
    }
    for (const auto& [part, why] : ev->unavailable) c.unavailable(part, why);
}

// Removes the staging folder however write_bundle leaves.
struct StagingDir {
    fs::path path;
    ~StagingDir() {
        std::error_code ec;
        if (!path.empty()) fs::remove_all(path, ec);
    }
};

Status write_text(const fs::path& p, const std::string& text) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return bundle_error("evidence.out", "cannot write " + p.string());
    return ok_status();
}

}  // namespace

redfish::SessionOptions bundle_bmc_options() {
    redfish::SessionOptions o;
    o.request_timeout = std::chrono::seconds(20);
    o.connect_timeout = std::chrono::seconds(5);
    o.max_attempts = 2;
    o.backoff_initial = std::chrono::milliseconds(200);
    o.backoff_max = std::chrono::seconds(2);
    o.max_retry_after = std::chrono::seconds(5);
    return o;
}

std::string default_bundle_path(const config::Fleet& fleet, const std::string& node, int64_t now_ms) {
    const auto secs = static_cast<time_t>(now_ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[32];
    std::strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
    const fs::path base = fleet.dir.empty() ? fs::path(".") : fs::path(fleet.dir);
    return (base / ".kiln" / "evidence" / (node + "-" + ts + ".tar.gz")).string();
}

Result<BundleReport> write_bundle(const BundleRequest& rq) {
    if (!rq.fleet || !rq.node) return bundle_error("evidence.node", "no node given");
    const auto& node = rq.node->name;
    const int64_t created = journal::now_ms();
    const fs::path out = rq.out.empty() ? fs::path(default_bundle_path(*rq.fleet, node, created)) : fs::path(rq.out);
    std::error_code ec;
    if (fs::is_directory(out, ec))
        return bundle_error("evidence.out",
                            fmt::format("{}: {} is a folder; give the archive's file name", node, out.string()));
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec)
        return bundle_error("evidence.out",
                            fmt::format("{}: cannot create {}: {}", node, parent.string(), ec.message()));

    SecretScrubber scrub = SecretScrubber::from_fleet(*rq.fleet);
    for (const auto& v : rq.extra_secrets) scrub.add(v);
    Contents c;
    std::string state;
    gather_smoke(rq, c);
    gather_handover(rq, c, state);
    gather_history(rq, c);
    gather_serial(rq, c);
    gather_bmc(rq, c, scrub);

    // Scrub everything, then prove it: a secret still present is a bug, and
    // then nothing is written at all.
    BundleReport report;
    int redactions = 0;
    json files = json::array();
    for (auto& f : c.files) {
        f.redactions = scrub.scrub(f.text);
        redactions += f.redactions;
        if (scrub.leaks(f.text))
            return bundle_error("evidence.secret",
                                fmt::format("{}: a secret survived scrubbing in {}; nothing written", node, f.path));
        BundleFile bf{f.path, sha256_hex(f.text), f.text.size(), f.source, f.redactions};
        files.push_back({{"path", bf.path},
                         {"sha256", bf.sha256},
                         {"bytes", bf.bytes},
                         {"source", bf.source},
                         {"redactions", bf.redactions}});
        report.files.push_back(std::move(bf));
    }
    json manifest = {{"schema", 1},
                     {"kind", "kiln evidence bundle"},
                     {"fleet", rq.fleet->name},
                     {"node", node},
                     {"rack", rq.node->rack},
                     {"state", state.empty() ? json(nullptr) : json(state)},
                     {"created_ms", created},
                     {"kiln_version", KILN_VERSION},
                     {"files", files},
                     {"parts", c.parts},
                     {"secret_scan", {{"values_checked", scrub.size()}, {"redactions", redactions}}}};
    std::string manifest_text = pretty(manifest);
    if (int n = scrub.scrub(manifest_text); n > 0) {
        // An error message echoed something secret: keep the scrubbed text.
        manifest = json::parse(manifest_text, nullptr, false);
    }
    if (scrub.leaks(manifest_text))
        return bundle_error("evidence.secret",
                            node + ": a secret survived scrubbing in manifest.json; nothing written");

    // Stage, archive, rename: the archive appears whole or not at all.
    const std::string top = node + "-evidence";
    std::string templ = (parent / ("." + out.filename().string() + ".staging-XXXXXX")).string();
    if (!mkdtemp(templ.data()))
        return bundle_error("evidence.out",
                            fmt::format("{}: cannot create a staging folder in {}", node, parent.string()));
    StagingDir staging{templ};
    for (const auto& f : c.files)
        if (auto s = write_text(staging.path / top / f.path, f.text); !s) return s.error();
    if (auto s = write_text(staging.path / top / "manifest.json", manifest_text); !s) return s.error();

    const fs::path tmp = staging.path / "bundle.tar.gz";
    CommandSpec spec;
    spec.argv = {"tar",
                 "--sort=name",
                 "--owner=0",
                 "--group=0",
                 "--numeric-owner",
                 fmt::format("--mtime=@{}", created / 1000),
                 "-czf",
                 tmp.string(),
                 "-C",
                 staging.path.string(),
                 top};
    spec.timeout = std::chrono::minutes(2);
    auto runner = rq.commands ? rq.commands : std::make_shared<ProcessRunner>();
    auto r = runner->run(spec);
    if (!r) return bundle_error("evidence.archive", fmt::format("{}: cannot run tar: {}", node, r.error().message));
    if (!r->success())
        return bundle_error(
            "evidence.archive",
            fmt::format("{}: {} failed ({}): {}", node, describe_argv(spec.argv),
                        r->timed_out ? "timed out" : "exit " + std::to_string(r->exit_code), r->err.substr(0, 400)));
    fs::rename(tmp, out, ec);
    if (ec)
        return bundle_error("evidence.out", fmt::format("{}: cannot write {}: {}", node, out.string(), ec.message()));
    report.archive = out.string();
    report.manifest = std::move(manifest);
    return report;
}

}  // namespace kiln::evidence
