#include "provisioner/cli/worker_command.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_loader.h"

namespace kiln::cli {

CLI::App* add_worker_command(CLI::App& app, WorkerArgs& args) {
    auto* worker = app.add_subcommand(
        "worker", "one of several processes sharing a fleet through a PostgreSQL store (leases, fencing)");
    worker->footer(
        "\nSeveral workers, on one machine or many, share the fleet's nodes through one\n"
        "PostgreSQL store. Each claims a node's next stage as a lease that its heartbeat\n"
        "renews every third of --lease-ttl; a node another worker holds is asked for\n"
        "again every --poll. A worker that dies (kill -9, lost host) stops renewing: once\n"
        "its leases expire another worker takes the nodes over, re-observes what the dead\n"
        "one left half-done and never repeats an action that already happened. A worker\n"
        "that stalls past its lease is fenced: its next journal write fails with\n"
        "\"lease lost on node N stage S (generation G superseded ...)\" before any further\n"
        "side effect, and it leaves that node to its new holder.\n"
        "\n"
        "The worker exits when none of its nodes has work left (0, or 1 when a node\n"
        "failed); SIGINT/SIGTERM stops it after in-flight actions, as `kiln apply`.\n"
        "\n"
        "Example: two workers, one per rack network, one store:\n"
        "  export KILN_PG_PASSWORD=...\n"
        "  kiln --store postgresql://kiln@db.example/kiln --store-password env:KILN_PG_PASSWORD \\\n"
        "       worker fleet.toml --label rack=r1\n"
        "  kiln --store postgresql://kiln@db.example/kiln --store-password env:KILN_PG_PASSWORD \\\n"
        "       worker fleet.toml --label rack=r2\n"
        "See docs/store.md.");
    worker->add_option("FLEET", args.fleet, "fleet config (TOML); every worker reads the same one")->required();
    worker->add_option("--label", args.labels,
                       "serve only nodes with this label, KEY=VALUE (repeatable; all must match; `rack` matches "
                       "the node's rack)");
    worker->add_option("--stage", args.stages, "only this stage (repeatable)");
    worker->add_option("--lease-ttl", args.lease_ttl,
                       "how long a claim outlives the worker's last heartbeat (default 30s; at least 1s)");
    worker->add_option("--poll", args.poll, "how often a node another worker holds is asked for again (default 1s)");
    worker->add_option("--worker-id", args.worker_id,
                       "this worker's name in the store (default HOST:PID:NONCE; must be unique)");
    worker->add_flag("--json", args.as_json, "JSON event stream on stdout, one object a line");
    worker->add_option("--metrics-listen", args.metrics_listen,
                       "serve Prometheus metrics at http://HOST:PORT/metrics while working (as 127.0.0.1:9464; "
                       "port 0 picks a free one, printed on stderr)");
    return worker;
}

CLI::App* add_workers_command(CLI::App& app, WorkersArgs& args) {
    auto* workers =
        app.add_subcommand("workers", "the live workers of a PostgreSQL store: heartbeat, labels, nodes held");
    workers->footer(
        "\nA worker is live until its lease ttl has passed since its last heartbeat; a\n"
        "worker killed with SIGKILL drops off the list then. See docs/store.md.");
    workers->add_option("FLEET", args.fleet, "fleet config (TOML), for its [store]")->required();
    workers->add_flag("--json", args.as_json, "as JSON");
    return workers;
}

std::string labels_text(const std::vector<std::string>& labels) {
    std::string out;
    for (const auto& l : labels) out += (out.empty() ? "" : ",") + l;
    return out;
}

int print_workers(const std::string& fleet_name, const std::vector<journal::WorkerRow>& workers, bool as_json,
                  std::FILE* out) {
    if (as_json) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& w : workers)
            list.push_back({{"worker", w.worker},
                            {"host", w.host},
                            {"pid", w.pid},
                            {"labels", w.labels},
                            {"started_ms", w.started_ms},
                            {"heartbeat_ms", w.heartbeat_ms},
                            {"heartbeat_age_ms", w.heartbeat_age_ms},
                            {"expires_ms", w.expires_ms},
                            {"nodes", w.nodes}});
        std::fprintf(out, "%s\n", nlohmann::json{{"fleet", fleet_name}, {"workers", list}}.dump(2).c_str());
        return 0;
    }
    if (workers.empty()) {
        std::fprintf(out, "no live workers\n");
        return 0;
    }
    size_t wn = 6, hn = 4, ln = 6;
    for (const auto& w : workers) {
        wn = std::max(wn, w.worker.size());
        hn = std::max(hn, w.host.size());
        ln = std::max(ln, w.labels.empty() ? size_t(5) : w.labels.size());
    }
    std::fprintf(out, "%-*s %-*s %8s %-*s %10s  NODES\n", int(wn), "WORKER", int(hn), "HOST", "PID", int(ln), "LABELS",
                 "HEARTBEAT");
    for (const auto& w : workers) {
        std::string nodes = std::to_string(w.nodes.size());
        for (size_t i = 0; i < w.nodes.size() && i < 8; ++i) nodes += (i ? ", " : " (") + w.nodes[i];
        if (w.nodes.size() > 8) nodes += ", ...";
        if (!w.nodes.empty()) nodes += ")";
        std::fprintf(out, "%-*s %-*s %8lld %-*s %8.1fs  %s\n", int(wn), w.worker.c_str(), int(hn), w.host.c_str(),
                     static_cast<long long>(w.pid), int(ln), w.labels.empty() ? "(all)" : w.labels.c_str(),
                     static_cast<double>(w.heartbeat_age_ms) / 1000.0, nodes.c_str());
    }
    std::fprintf(out, "\n%zu live worker%s\n", workers.size(), workers.size() == 1 ? "" : "s");
    return 0;
}

Result<std::map<std::string, std::string>> parse_labels(const std::vector<std::string>& labels) {
    std::map<std::string, std::string> out;
    for (const auto& l : labels) {
        const auto eq = l.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == l.size())
            return make_error("cli", "worker.label", fmt::format("--label '{}': expected KEY=VALUE, as rack=r1", l));
        const std::string key = l.substr(0, eq);
        if (!out.emplace(key, l.substr(eq + 1)).second)
            return make_error("cli", "worker.label",
                              fmt::format("--label '{}': key '{}' given twice (a node has one value per key)", l, key));
    }
    return out;
}

bool node_has_labels(const config::Node& node, const std::map<std::string, std::string>& labels) {
    for (const auto& [key, value] : labels) {
        auto it = node.labels.find(key);
        if (it != node.labels.end()) {
            if (it->second != value) return false;
        } else if (!(key == "rack" && node.rack == value)) {
            return false;
        }
    }
    return true;
}

Result<engine::RunOptions> worker_run_options(const WorkerArgs& args, const config::Fleet& fleet) {
    auto labels = parse_labels(args.labels);
    if (!labels) return labels.error();
    auto ttl = config::parse_duration(args.lease_ttl);
    if (!ttl || *ttl < std::chrono::seconds(1))
        return make_error("cli", "worker.lease_ttl",
                          fmt::format("--lease-ttl '{}': expected a duration of at least 1s, as 30s", args.lease_ttl));
    auto poll = config::parse_duration(args.poll);
    if (!poll || poll->count() <= 0 || *poll > *ttl)
        return make_error(
            "cli", "worker.poll",
            fmt::format("--poll '{}': expected a duration above 0 and at most --lease-ttl, as 1s", args.poll));
    if (args.worker_id.find_first_of(" \t\r\n") != std::string::npos)
        return make_error("cli", "worker.id", "--worker-id: no spaces, please (it names the worker in the store)");
    engine::RunOptions o;
    o.command = "worker";
    o.stages = args.stages;
    o.lease_ttl = *ttl;
    o.lease_poll = *poll;
    for (const auto& n : fleet.nodes)
        if (node_has_labels(n, *labels)) o.nodes.push_back(n.name);
    if (o.nodes.empty())
        return make_error("cli", "worker.no_nodes",
                          fmt::format("no node in {} has the labels given with --label; nothing to serve", fleet.path));
    return o;
}

}  // namespace kiln::cli
