#include "provisioner/cli/app.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "provisioner/cli/report_command.h"
#include "provisioner/cli/status_printer.h"
#include "provisioner/cli/worker_command.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/engine.h"
#include "provisioner/engine/run_metrics.h"
#include "provisioner/journal/leases.h"
#include "provisioner/journal/open_store.h"
#include "provisioner/net/bmc_request_tally.h"
#include "provisioner/net/metrics_server.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Globals {
    std::string journal;
    std::string store;            // postgresql://... (replaces the fleet's [store])
    std::string store_password;   // env:NAME or file:PATH
    std::string store_reconnect;  // a duration; "" = the store's default
    std::string log_format = "text";
    std::string pipelines;
};

std::string journal_path(const Globals& g, const config::Fleet& fleet) {
    if (!g.journal.empty()) return g.journal;
    return (fs::path(fleet.dir) / ".kiln" / "journal.db").string();
}

void print_error(const Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.str().c_str());
}

// The journal this command uses: --store, else the fleet's [store], else
// the SQLite file (--journal or beside the fleet).
Result<journal::StoreSpec> store_spec(const Globals& g, const config::Fleet& fleet) {
    journal::StoreSpec spec;
    if (!g.store.empty()) {
        if (!g.journal.empty()) return make_error("cli", "store.conflict", "give --store or --journal, not both");
        if (auto s = journal::check_store_url(g.store); !s) return s.error();
        spec.url = g.store;
    } else if (fleet.store && g.journal.empty()) {
        spec.url = fleet.store->url;
        spec.password = fleet.store->password;
    } else {
        spec.sqlite_path = journal_path(g, fleet);
    }
    if (!g.store_password.empty()) {
        if (!spec.postgres())
            return make_error("cli", "store.password",
                              "--store-password needs a PostgreSQL store (--store or [store])");
        auto p = Secret::parse(g.store_password, fs::current_path().string());
        if (!p) return make_error("cli", "store.password", "--store-password: " + p.error().message);
        spec.password = *p;
    }
    if (!g.store_reconnect.empty()) {
        auto d = config::parse_duration(g.store_reconnect);
        if (!d || d->count() < 0)
            return make_error(
                "cli", "store.reconnect",
                "--store-reconnect '" + g.store_reconnect + "': expected a duration, as 60s (0s: no retry)");
        if (!spec.postgres())
            return make_error("cli", "store.reconnect",
                              "--store-reconnect needs a PostgreSQL store (--store or [store])");
        spec.reconnect_for = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
    }
    return spec;
}

// Opens the journal to read; null when none exists yet.
Result<std::unique_ptr<journal::Store>> open_reader(const Globals& g, const config::Fleet& fleet) {
    auto spec = store_spec(g, fleet);
    if (!spec) return spec.error();
    return journal::open_store_reader(*spec);
}

// Loads the fleet or prints every diagnostic and returns nullopt.
std::optional<config::Fleet> load(const std::string& path, const Globals& g, const engine::StageRegistry& registry,
                                  bool json_errors = false) {
    config::LoadOptions opts = registry.load_options();
    opts.default_pipelines_dir = KILN_DEFAULT_PIPELINES_DIR;
    opts.pipelines_dir_override = g.pipelines;
    auto r = config::load_fleet(path, opts);
    if (r.fleet) return std::move(r.fleet);
    if (json_errors) {
        json errs = json::array();
        for (const auto& d : r.errors)
            errs.push_back({{"file", d.pos.file},
                            {"line", d.pos.line},
                            {"column", d.pos.column},
                            {"key", d.key},
                            {"message", d.message}});
        std::printf("%s\n", json{{"ok", false}, {"errors", errs}}.dump(2).c_str());
    }
    for (const auto& d : r.errors) std::fprintf(stderr, "%s\n", d.str().c_str());
    std::fprintf(stderr, "kiln: %s: %zu error%s; nothing was changed\n", path.c_str(), r.errors.size(),
                 r.errors.size() == 1 ? "" : "s");
    return std::nullopt;
}

// SIGINT/SIGTERM: the first asks for a soft stop, the second a hard one.
// Signals are blocked in every thread and taken by one watcher with sigwait,
// so nothing runs inside a signal handler.
class SignalWatcher {
public:
    explicit SignalWatcher(engine::StopToken& stop) : stop_(stop) {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
        sigaddset(&set_, SIGUSR1);  // our own "run is over"
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
        thread_ = std::thread([this] {
            for (int count = 0;;) {
                int sig = 0;
                if (sigwait(&set_, &sig) != 0) continue;
                if (sig == SIGUSR1) return;
                if (++count == 1) {
                    std::fprintf(stderr, "\nkiln: %s: stopping after in-flight actions (again to cut waits short)\n",
                                 sig == SIGINT ? "interrupt" : "terminate");
                    stop_.request_soft();
                } else {
                    stop_.request_hard();
                }
            }
        });
    }
    ~SignalWatcher() {
        pthread_kill(thread_.native_handle(), SIGUSR1);
        thread_.join();
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }

private:
    engine::StopToken& stop_;
    sigset_t set_{}, old_{};
    std::thread thread_;
};

std::string pad(const std::string& s, size_t n) {
    return s.size() >= n ? s + " " : s + std::string(n - s.size(), ' ');
}

// ---- validate -------------------------------------------------------------

int cmd_validate(const std::string& fleet_path, bool as_json, const Globals& g, const engine::StageRegistry& reg) {
    auto fleet = load(fleet_path, g, reg, as_json);
    if (!fleet) return 1;
    if (as_json) {
        json pipelines = json::array();
        for (const auto& [name, p] : fleet->pipelines) pipelines.push_back(name);
        std::printf("%s\n", json{{"ok", true},
                                 {"fleet", fleet->name},
                                 {"nodes", fleet->nodes.size()},
                                 {"racks", fleet->racks.size()},
                                 {"pipelines", pipelines}}
                                .dump(2)
                                .c_str());
        return 0;
    }
    std::string pipelines;
    for (const auto& [name, p] : fleet->pipelines) pipelines += (pipelines.empty() ? "" : ", ") + name;
    std::printf("%s: ok: fleet %s, %zu node%s in %zu rack%s; pipelines: %s\n", fleet_path.c_str(), fleet->name.c_str(),
                fleet->nodes.size(), fleet->nodes.size() == 1 ? "" : "s", fleet->racks.size(),
                fleet->racks.size() == 1 ? "" : "s", pipelines.c_str());
    return 0;
}

// ---- plan -----------------------------------------------------------------

int cmd_plan(const std::string& fleet_path, const engine::RunOptions& opts, bool as_json, bool detailed,
             const Globals& g, const engine::StageRegistry& reg) {
    auto fleet = load(fleet_path, g, reg);
    if (!fleet) return 1;
    auto store = open_reader(g, *fleet);
    if (!store) {
        print_error(store.error());
        return 1;
    }
    engine::StopToken stop;
    engine::Engine eng(*fleet, reg, store->get(), nullptr, stop);
    // Printed node by node as the plan comes: 100,000 nodes are never all
    // in memory, as entries or as one JSON document.
    bool first = true;
    auto entry_json = [](const engine::PlanEntry& e) {
        json acts = json::array();
        for (const auto& a : e.actions)
            acts.push_back({{"id", a.id}, {"description", a.description}, {"detail", a.detail}});
        json j = {{"node", e.node},
                  {"stage", e.stage},
                  {"status", engine::to_string(e.status)},
                  {"input_hash", e.input_hash},
                  {"last_verified", e.last_verified.empty() ? json(nullptr) : json(e.last_verified)},
                  {"actions", acts},
                  {"notes", e.notes}};
        if (e.status == engine::PlanStatus::Error) {
            j["error"] = e.error;
            j["error_code"] = e.error_code;
        }
        return j;
    };
    // json::dump(2) of {"entries": [...], "fleet": ..., "summary": ...},
    // written a piece at a time: each piece indented to its depth.
    auto indented = [](const std::string& text, const std::string& indent) {
        std::string out;
        for (char c : text) {
            out += c;
            if (c == '\n') out += indent;
        }
        return out;
    };
    auto print_json = [&](std::vector<engine::PlanEntry>& entries) {
        for (const auto& e : entries) {
            if (first) std::printf("{\n  \"entries\": [");
            std::printf("%s\n    %s", first ? "" : ",", indented(entry_json(e).dump(2), "    ").c_str());
            first = false;
        }
    };
    auto print_text = [&](std::vector<engine::PlanEntry>& entries) {
        for (size_t k = 0; k < entries.size(); ++k) {
            const auto& e = entries[k];
            if (k == 0) std::printf("%s\n", e.node.c_str());
            std::string why;
            if (e.status == engine::PlanStatus::Work && e.actions.empty())
                why = e.last_verified.empty() ? "verify (never verified)" : "verify (inputs changed)";
            else if (e.status == engine::PlanStatus::Work)
                why = fmt::format("{} action{}", e.actions.size(), e.actions.size() == 1 ? "" : "s");
            else if (e.status == engine::PlanStatus::Error)
                why = e.error;
            std::printf("  %s%s%s\n", pad(e.stage, 10).c_str(), pad(engine::to_string(e.status), 10).c_str(),
                        why.c_str());
            for (const auto& a : e.actions) std::printf("    + %s\n", a.description.c_str());
            for (const auto& n : e.notes) std::printf("    ! %s\n", n.c_str());
        }
    };
    auto report = as_json ? eng.plan(opts, print_json) : eng.plan(opts, print_text);
    if (!report) {
        if (as_json && !first) std::printf("\n  ]\n}\n");  // what was printed stays valid JSON
        print_error(report.error());
        return 1;
    }
    const int work = report->work, converged = report->converged, errors = report->errors, actions = report->actions;
    if (as_json) {
        std::printf("%s", first ? "{\n  \"entries\": []" : "\n  ]");
        json summary = {{"work", work}, {"converged", converged}, {"errors", errors}, {"actions", actions}};
        std::printf(",\n  \"fleet\": %s,\n  \"summary\": %s\n}\n", json(fleet->name).dump().c_str(),
                    indented(summary.dump(2), "  ").c_str());
    } else {
        std::printf("Plan: %d node-stage%s with work (%d action%s), %d converged, %d error%s.\n", work,
                    work == 1 ? "" : "s", actions, actions == 1 ? "" : "s", converged, errors, errors == 1 ? "" : "s");
    }
    if (errors) return 1;
    return detailed && work ? 2 : 0;
}

// ---- apply / reimage ------------------------------------------------------

void print_summary(const engine::RunReport& r, std::FILE* out) {
    std::map<std::string, int> by_state;
    size_t wn = 4, ws = 5, wst = 5;
    for (const auto& n : r.nodes) {
        ++by_state[engine::to_string(n.state)];
        wn = std::max(wn, n.node.size());
        ws = std::max(ws, std::string_view(engine::to_string(n.state)).size());
        wst = std::max(wst, n.stage.size());
    }
    std::fprintf(out, "\n%s%s%sACTIONS  DETAIL\n", pad("NODE", wn + 1).c_str(), pad("STATE", ws + 1).c_str(),
                 pad("STAGE", wst + 1).c_str());
    for (const auto& n : r.nodes) {
        std::string detail = n.error.empty() ? n.detail : n.error;
        std::fprintf(out, "%s%s%s%s%s\n", pad(n.node, wn + 1).c_str(), pad(engine::to_string(n.state), ws + 1).c_str(),
                     pad(n.stage, wst + 1).c_str(), pad(std::to_string(n.actions), 9).c_str(), detail.c_str());
    }
    std::string counts;
    for (const auto& [state, n] : by_state) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, state);
    std::fprintf(
        out, "\nrun %lld %s: %zu node%s (%s); %d action%s, %d stage%s run, %d skipped%s\n",
        static_cast<long long>(r.run_id), engine::to_string(r.status), r.nodes.size(), r.nodes.size() == 1 ? "" : "s",
        counts.c_str(), r.actions, r.actions == 1 ? "" : "s", r.stages_run, r.stages_run == 1 ? "" : "s",
        r.stages_skipped,
        r.stages_done_elsewhere ? fmt::format(", {} verified by other workers", r.stages_done_elsewhere).c_str() : "");
    if (r.status == engine::RunStatus::Completed && r.actions == 0 && r.stages_run == 0)
        std::fprintf(out, "nothing to do: every selected node-stage is converged\n");
}

// `worker` (non-null for `kiln worker`) adds its node selection and lease
// timings to `opts` and needs a PostgreSQL store.
int cmd_apply(const std::string& fleet_path, engine::RunOptions opts, bool as_json, const Globals& g,
              const engine::StageRegistry& reg, const WorkerArgs* worker = nullptr) {
    auto fleet = load(fleet_path, g, reg);
    if (!fleet) return 1;
    if (worker) {
        auto w = worker_run_options(*worker, *fleet);
        if (!w) {
            print_error(w.error());
            return 1;
        }
        opts = std::move(*w);
    }
    engine::StopToken stop;
    // Before any thread exists (the journal may start one): every thread
    // inherits the blocked mask, so only the watcher ever takes a signal.
    SignalWatcher signals(stop);
    // Check the selection before the journal is touched: nothing half-applied.
    {
        engine::Engine probe(*fleet, reg, nullptr, nullptr, stop);
        if (auto s = probe.check(opts); !s) {
            print_error(s.error());
            return 1;
        }
    }
    auto spec = store_spec(g, *fleet);
    if (!spec) {
        print_error(spec.error());
        return 1;
    }
    if (worker && !spec->postgres()) {
        print_error(make_error("cli", "worker.store",
                               "kiln worker shares a fleet through a PostgreSQL store: give --store postgresql://... "
                               "or a [store] table in the fleet (with the journal file, run `kiln apply`)"));
        return 1;
    }
    // The journal file allows one run at a time; a PostgreSQL store is
    // shared by workers, each node claimed as a lease (journal/leases.h).
    std::optional<journal::RunGuard> lock;
    if (!spec->postgres()) {
        auto l = journal::RunGuard::acquire(*spec);
        if (!l) {
            print_error(l.error());
            return 1;
        }
        lock.emplace(std::move(*l));
    }
    StatusPrinter::Mode mode = as_json                  ? StatusPrinter::Mode::Json
                               : g.log_format == "json" ? StatusPrinter::Mode::JsonLines
                               : isatty(fileno(stdout)) ? StatusPrinter::Mode::Live
                                                        : StatusPrinter::Mode::Lines;
    StatusPrinter printer(mode, stdout);
    // A worker's metrics: counted from the engine's events on their way to
    // the printer, served before the store is touched so a bad address
    // changes nothing.
    std::atomic<journal::Leases*> metered{nullptr};
    engine::RunMetrics metrics(&printer, [&metered]() {
        auto* l = metered.load();
        return l ? l->counters() : journal::LeaseCounters{};
    });
    std::unique_ptr<net::MetricsServer> metrics_server;
    if (worker && !worker->metrics_listen.empty()) {
        auto m = net::MetricsServer::start(
            worker->metrics_listen, [&metrics] { return metrics.render() + net::BmcRequestTally::process().render(); });
        if (!m) {
            print_error(m.error());
            return 1;
        }
        metrics_server = std::move(*m);
        std::fprintf(stderr, "kiln: metrics at %s\n", metrics_server->url().c_str());
    }
    auto store = journal::open_store(*spec);
    if (!store) {
        print_error(store.error());
        return 1;
    }
    journal::Leases* leases = (*store)->leases();
    if (worker && leases) {
        if (!worker->worker_id.empty()) leases->set_worker_id(worker->worker_id);
        // Listed by `kiln workers` until its heartbeat stops.
        if (auto r = leases->register_worker(labels_text(worker->labels), opts.lease_ttl); !r) {
            print_error(r.error());
            return 1;
        }
        metered = leases;
    }
    engine::Engine eng(*fleet, reg, store->get(), metrics_server ? static_cast<engine::EventSink*>(&metrics) : &printer,
                       stop);
    auto report = eng.run(opts);
    printer.finish();
    if (worker && leases) (void)leases->deregister_worker();
    if (!report) {
        print_error(report.error());
        return 1;
    }
    if (as_json) {
        json nodes = json::array();
        for (const auto& n : report->nodes)
            nodes.push_back({{"name", n.node},
                             {"state", engine::to_string(n.state)},
                             {"detail", n.detail},
                             {"stage", n.stage},
                             {"error", n.error},
                             {"actions", n.actions}});
        std::printf("%s\n", json{{"event", "summary"},
                                 {"run_id", report->run_id},
                                 {"status", engine::to_string(report->status)},
                                 {"actions", report->actions},
                                 {"stages_run", report->stages_run},
                                 {"stages_skipped", report->stages_skipped},
                                 {"stages_done_elsewhere", report->stages_done_elsewhere},
                                 {"nodes", nodes}}
                                .dump()
                                .c_str());
    } else if (g.log_format != "json") {
        print_summary(*report, stdout);
    }
    if (report->status == engine::RunStatus::Interrupted) return 130;
    return report->status == engine::RunStatus::Completed ? 0 : 1;
}

// ---- status ---------------------------------------------------------------

int cmd_status(const std::string& fleet_path, bool as_json, const Globals& g, const engine::StageRegistry& reg) {
    auto fleet = load(fleet_path, g, reg);
    if (!fleet) return 1;
    auto spec = store_spec(g, *fleet);
    if (!spec) {
        print_error(spec.error());
        return 1;
    }
    auto store = journal::open_store_reader(*spec);
    if (!store) {
        print_error(store.error());
        return 1;
    }
    std::map<std::string, journal::NodeState> states;
    if (*store) {
        auto rows = (*store)->node_states();
        if (!rows) {
            print_error(rows.error());
            return 1;
        }
        for (auto& s : *rows) states[s.node] = s;
    }
    // Workers on a PostgreSQL store hold no run lock: a node's state there
    // is whatever its lease holder last wrote, not second-guessed here; the
    // holder itself is shown beside it.
    std::map<std::string, journal::LeaseRow> holders;
    if (spec->postgres() && *store) {
        auto held = (*store)->live_leases();
        if (!held) {
            print_error(held.error());
            return 1;
        }
        for (auto& l : *held) holders[l.node] = l;
    }
    const bool live_run = !spec->postgres() && journal::RunGuard::held(*spec);
    const bool can_tell = !spec->postgres();
    json nodes = json::array();
    std::vector<journal::NodeState> shown;
    for (const auto& n : fleet->nodes) {
        journal::NodeState s;
        auto it = states.find(n.name);
        if (it != states.end()) s = it->second;
        s.node = n.name;
        if (s.state.empty()) s.state = "pending";
        if (s.state == "running" && can_tell && !live_run) {
            // The run that set it is gone (killed): say so, don't pretend.
            s.state = "pending";
            s.detail = "interrupted: the run stopped without finishing";
        }
        json entry = {{"name", s.node},
                      {"state", s.state},
                      {"stage", s.stage.empty() ? json(nullptr) : json(s.stage)},
                      {"error", s.error.empty() ? json(nullptr) : json(s.error)},
                      {"detail", s.detail}};
        if (spec->postgres()) {
            auto h = holders.find(n.name);
            entry["worker"] = h == holders.end() ? json(nullptr) : json(h->second.worker);
        }
        nodes.push_back(std::move(entry));
        shown.push_back(std::move(s));
    }
    if (as_json) {
        std::printf("%s\n", json{{"fleet", fleet->name}, {"nodes", nodes}}.dump(2).c_str());
        return 0;
    }
    size_t wn = 4;
    for (const auto& s : shown) wn = std::max(wn, s.node.size());
    // On a shared store, a WORKER column: who holds the node's lease now.
    size_t hn = 0;
    if (spec->postgres()) {
        hn = 7;
        for (const auto& [node, l] : holders) hn = std::max(hn, l.worker.size() + 1);
    }
    std::printf("%s%s%s%sDETAIL\n", pad("NODE", wn + 1).c_str(), pad("STATE", 12).c_str(), pad("STAGE", 10).c_str(),
                hn ? pad("WORKER", hn).c_str() : "");
    std::map<std::string, int> counts;
    for (const auto& s : shown) {
        ++counts[s.state];
        auto h = holders.find(s.node);
        std::printf("%s%s%s%s%s\n", pad(s.node, wn + 1).c_str(), pad(s.state, 12).c_str(), pad(s.stage, 10).c_str(),
                    hn ? pad(h == holders.end() ? "-" : h->second.worker, hn).c_str() : "",
                    (s.error.empty() ? s.detail : s.error).c_str());
    }
    std::string line;
    for (const auto& [state, c] : counts) line += fmt::format("{}{} {}", line.empty() ? "" : ", ", c, state);
    std::printf("\n%zu node%s: %s%s\n", shown.size(), shown.size() == 1 ? "" : "s", line.c_str(),
                live_run ? " (a run is in progress)" : "");
    return 0;
}

// ---- workers --------------------------------------------------------------

int cmd_workers(const WorkersArgs& args, const Globals& g, const engine::StageRegistry& reg) {
    auto fleet = load(args.fleet, g, reg);
    if (!fleet) return 1;
    auto spec = store_spec(g, *fleet);
    if (!spec) {
        print_error(spec.error());
        return 1;
    }
    if (!spec->postgres()) {
        print_error(make_error("cli", "workers.store",
                               "kiln workers lists the workers of a PostgreSQL store: give --store postgresql://... "
                               "or a [store] table in the fleet (the journal file has no workers)"));
        return 1;
    }
    auto store = journal::open_store_reader(*spec);
    if (!store) {
        print_error(store.error());
        return 1;
    }
    std::vector<journal::WorkerRow> rows;
    if (*store) {  // no schema yet: no worker ever ran
        auto w = (*store)->live_workers();
        if (!w) {
            print_error(w.error());
            return 1;
        }
        rows = std::move(*w);
    }
    return print_workers(fleet->name, rows, args.as_json, stdout);
}

// ---- record ---------------------------------------------------------------

// For a command about one node of the fleet: its journal, opened to read
// (null inside: no journal yet). nullopt: the error is printed.
std::optional<std::unique_ptr<journal::Store>> open_node_reader(const std::string& fleet_path, const std::string& node,
                                                                const char* command, const Globals& g,
                                                                const engine::StageRegistry& reg) {
    auto fleet = load(fleet_path, g, reg);
    if (!fleet) return std::nullopt;
    if (!fleet->find_node(node)) {
        print_error(make_error(command, "node.unknown", "no node '" + node + "' in " + fleet_path));
        return std::nullopt;
    }
    auto store = open_reader(g, *fleet);
    if (!store) {
        print_error(store.error());
        return std::nullopt;
    }
    return std::move(*store);
}

int cmd_record(const std::string& fleet_path, const std::string& node, const std::string& kind, bool as_json,
               const Globals& g, const engine::StageRegistry& reg) {
    auto store = open_node_reader(fleet_path, node, "record", g, reg);
    if (!store) return 1;
    std::optional<journal::NodeRecord> rec;
    if (*store) {
        auto r = (*store)->latest_record(node, kind);
        if (!r) {
            print_error(r.error());
            return 1;
        }
        rec = std::move(*r);
    }
    if (!rec) {
        print_error(make_error("record", "record.none",
                               "no " + kind + " record of " + node +
                                   " in the journal (the stage that publishes it has not run there; "
                                   "kinds: smoke.result, handover)"));
        return 1;
    }
    auto body = json::parse(rec->body, nullptr, false);
    if (body.is_discarded()) {
        print_error(make_error("record", "journal.record",
                               "the " + kind + " record of " + node + " in the journal is not JSON"));
        return 1;
    }
    if (as_json)
        body = json{{"node", rec->node},   {"kind", rec->kind},   {"schema", rec->schema}, {"run_id", rec->run_id},
                    {"stage", rec->stage}, {"ts_ms", rec->ts_ms}, {"body", body}};
    std::printf("%s\n", body.dump(2).c_str());
    return 0;
}

// ---- history --------------------------------------------------------------

int cmd_history(const std::string& fleet_path, const std::string& node, int limit, bool as_json, const Globals& g,
                const engine::StageRegistry& reg) {
    auto store = open_node_reader(fleet_path, node, "history", g, reg);
    if (!store) return 1;
    std::vector<journal::HistoryEntry> entries;
    if (*store) {
        auto h = (*store)->history(node, limit);
        if (!h) {
            print_error(h.error());
            return 1;
        }
        entries = std::move(*h);
    }
    if (as_json) {
        json arr = json::array();
        for (const auto& e : entries)
            arr.push_back({{"ts_ms", e.ts_ms},
                           {"run_id", e.run_id},
                           {"kind", e.kind},
                           {"stage", e.stage},
                           {"name", e.name},
                           {"text", e.text},
                           {"outcome", e.outcome},
                           {"error", e.error}});
        std::printf("%s\n", json{{"node", node}, {"entries", arr}}.dump(2).c_str());
        return 0;
    }
    if (entries.empty()) {
        std::printf("%s: no history yet\n", node.c_str());
        return 0;
    }
    for (const auto& e : entries) {
        auto secs = static_cast<time_t>(e.ts_ms / 1000);
        std::tm tm{};
        gmtime_r(&secs, &tm);
        char ts[32];
        std::strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
        std::string what;
        if (e.kind == "stage")
            what = fmt::format("stage {} {}{}", e.stage, e.name, e.error.empty() ? "" : ": " + e.error);
        else if (e.kind == "action")
            what = fmt::format("action {} {} [{}]{}", e.stage, e.text, e.outcome.empty() ? "unfinished" : e.outcome,
                               e.error.empty() ? "" : ": " + e.error);
        else
            what = fmt::format("{} {}{}", e.name, e.stage.empty() ? "" : e.stage + ": ", e.text);
        std::printf("%sZ  run %-4lld %s\n", ts, static_cast<long long>(e.run_id), what.c_str());
    }
    return 0;
}

// ---- stages ---------------------------------------------------------------

int cmd_stages(bool as_json, const engine::StageRegistry& reg) {
    // The product's stages in pipeline order, then any others this build registers.
    const std::vector<std::string> names = reg.ordered_names();
    json arr = json::array();
    for (const auto& name : names) arr.push_back({{"name", name}, {"implemented", reg.implemented(name)}});
    if (as_json) {
        std::printf("%s\n", json{{"stages", arr}}.dump(2).c_str());
        return 0;
    }
    for (const auto& s : arr)
        std::printf("%s%s\n", pad(s["name"].get<std::string>(), 12).c_str(),
                    s["implemented"].get<bool>() ? "implemented" : "not implemented in this build");
    return 0;
}

}  // namespace

int run_cli(int argc, char** argv, const engine::StageRegistry& registry) {
    CLI::App app{
        "kiln: bare-metal GPU servers to validated GPU VMs from one declarative fleet config.\n"
        "Each node runs its role's pipeline (firmware, network, image, vm, smoke, handover);\n"
        "every stage observes, plans, applies and verifies, and the journal remembers what was\n"
        "done so a re-run repeats nothing. Start with `kiln validate FLEET`, then `kiln plan FLEET`."};
    app.require_subcommand(1);
    app.fallthrough();
    Globals g;
    app.add_option("--journal", g.journal, "journal file (default: .kiln/journal.db beside the fleet file)");
    app.add_option("--store", g.store,
                   "journal in PostgreSQL, postgresql://[user@]host[:port]/db (no password in it; default: the "
                   "fleet's [store], else the journal file)");
    app.add_option("--store-password", g.store_password, "the store's password as env:NAME or file:PATH");
    app.add_option("--store-reconnect", g.store_reconnect,
                   "how long to keep reconnecting when the PostgreSQL server goes away mid-run (default 60s)");
    app.add_option("--log-format", g.log_format, "log lines as text or json")->check(CLI::IsMember({"text", "json"}));
    app.add_option("--pipelines", g.pipelines,
                   "folder of pipeline files (default: the fleet's, else the shipped ones)");
    app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);

    std::string fleet, node;
    bool as_json = false, detailed = false;
    std::vector<std::string> nodes, stages;
    int limit = 50;

    auto* validate = app.add_subcommand("validate", "check a fleet config; exit 1 with FILE:LINE:COL lines");
    validate->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    validate->add_flag("--json", as_json, "result as JSON");

    auto* plan = app.add_subcommand("plan", "show what apply would do; changes nothing");
    plan->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    plan->add_option("--node", nodes, "only this node (repeatable)");
    plan->add_option("--stage", stages, "only this stage (repeatable)");
    plan->add_flag("--json", as_json, "plan as JSON");
    plan->add_flag("--detailed-exitcode", detailed, "exit 0 when converged, 2 when there is work, 1 on error");

    auto* apply = app.add_subcommand("apply", "bring nodes to the declared state");
    apply->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    apply->add_option("--node", nodes, "only this node (repeatable)");
    apply->add_option("--stage", stages, "only this stage (repeatable)");
    apply->add_flag("--json", as_json, "JSON event stream on stdout, one object a line");

    auto* status = app.add_subcommand("status", "every node's state, stage and last error");
    status->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    status->add_flag("--json", as_json, R"(as {"nodes": [{"name", "state", "stage", "error"}]})");

    auto* reimage = app.add_subcommand("reimage", "run the reimage pipeline for one node, redoing its stages");
    reimage->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    reimage->add_option("NODE", node, "node name")->required();
    reimage->add_flag("--json", as_json, "JSON event stream on stdout");

    auto* history = app.add_subcommand("history", "the journal for one node, newest first");
    history->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    history->add_option("NODE", node, "node name")->required();
    history->add_option("--limit", limit, "at most this many entries (0 = all)");
    history->add_flag("--json", as_json, "as JSON");

    std::string record_kind;
    auto* record = app.add_subcommand(
        "record", "print the newest record a stage published for one node (the smoke result, the handover verdict)");
    record->add_option("FLEET", fleet, "fleet config (TOML)")->required();
    record->add_option("NODE", node, "node name")->required();
    record->add_option("KIND", record_kind, "smoke.result or handover")->required();
    record->add_flag("--json", as_json, "with its envelope: kind, schema, run, stage, time; the record itself is JSON");

    ReportArgs report_args;
    auto* report_cmd = add_report_command(app, report_args);

    WorkerArgs worker_args;
    auto* worker = add_worker_command(app, worker_args);
    WorkersArgs workers_args;
    auto* workers_cmd = add_workers_command(app, workers_args);

    auto* stages_cmd =
        app.add_subcommand("stages", "list the stages pipelines may name, and which this build implements");
    stages_cmd->add_flag("--json", as_json, "as JSON");

    // The registry refuses a module the names in kCoreCommandNames; they
    // must be exactly the commands made above, or a module could take a
    // name added here and CLI11 would refuse the whole command line.
    std::set<std::string> core_names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) core_names.insert(sub->get_name());
    if (core_names != engine::kCoreCommandNames)
        throw std::logic_error("kiln: engine::kCoreCommandNames does not list the CLI shell's own commands");

    // The stage modules' commands (`kiln firmware`, `kiln vm`, ...), each
    // under the name it registered; the registry refuses a core command's.
    std::vector<std::pair<CLI::App*, std::unique_ptr<engine::StageCommand>>> module_commands;
    for (const auto& spec : registry.commands()) {
        auto* sub = app.add_subcommand(spec.name, spec.description);
        auto command = spec.make();
        command->add_to(*sub);
        module_commands.emplace_back(sub, std::move(command));
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }

    engine::RunOptions opts;
    opts.nodes = nodes;
    opts.stages = stages;
    if (*validate) return cmd_validate(fleet, as_json, g, registry);
    if (*plan) {
        opts.command = "plan";
        return cmd_plan(fleet, opts, as_json, detailed, g, registry);
    }
    if (*apply) return cmd_apply(fleet, opts, as_json, g, registry);
    if (*reimage) {
        opts.command = "reimage";
        opts.nodes = {node};
        opts.pipeline = "reimage";
        opts.reimage = true;
        return cmd_apply(fleet, opts, as_json, g, registry);
    }
    if (*worker) return cmd_apply(worker_args.fleet, opts, worker_args.as_json, g, registry, &worker_args);
    if (*status) return cmd_status(fleet, as_json, g, registry);
    if (*workers_cmd) return cmd_workers(workers_args, g, registry);
    if (*history) return cmd_history(fleet, node, limit, as_json, g, registry);
    if (*record) return cmd_record(fleet, node, record_kind, as_json, g, registry);
    if (*stages_cmd) return cmd_stages(as_json, registry);
    if (*report_cmd)
        return cmd_report(
            report_args, [&](const config::Fleet& f) { return open_reader(g, f); }, g.pipelines, registry);
    for (auto& [sub, command] : module_commands) {
        if (!*sub) continue;
        engine::CommandEnv env;
        env.load_fleet = [&](const std::string& p) { return load(p, g, registry); };
        env.open_journal = [&](const config::Fleet& f) { return open_reader(g, f); };
        if (!g.store_password.empty())
            if (auto s = Secret::parse(g.store_password, fs::current_path().string()))
                if (auto v = s->resolve()) env.extra_secrets.push_back(*v);
        return command->run(env);
    }
    return 1;
}

}  // namespace kiln::cli
