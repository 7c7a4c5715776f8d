#include "provisioner/engine/run_metrics.h"

#include <fmt/format.h>

namespace kiln::engine {

namespace {

// Label values escape backslash, double quote and newline (the format's rule).
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

}  // namespace

RunMetrics::RunMetrics(EventSink* next, std::function<journal::LeaseCounters()> counters)
    : next_(next), counters_(std::move(counters)) {}

const std::vector<double>& RunMetrics::buckets() {
    // Stages run from milliseconds (converged) to an hour (firmware waves).
    static const std::vector<double> b = {0.01, 0.1, 1, 10, 60, 300, 900, 1800, 3600};
    return b;
}

void RunMetrics::on_event(const EngineEvent& e) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        const std::string key = e.node + "\t" + e.stage;
        switch (e.kind) {
            case EngineEvent::Kind::StageStart:
                nodes_[e.node] = {"running", e.stage};
                started_[key] = Clock::now();
                break;
            case EngineEvent::Kind::StageEnd: {
                ++results_[{e.stage, e.outcome}];
                auto it = started_.find(key);
                if (it == started_.end()) break;  // ended before it started (lease lost at claim)
                const double s = std::chrono::duration<double>(Clock::now() - it->second).count();
                started_.erase(it);
                auto& h = durations_[e.stage];
                if (h.counts.empty()) h.counts.assign(buckets().size(), 0);
                for (size_t i = 0; i < buckets().size(); ++i)
                    if (s <= buckets()[i]) {
                        ++h.counts[i];
                        break;
                    }
                ++h.count;
                h.sum += s;
                break;
            }
            case EngineEvent::Kind::NodeEnd:
                nodes_[e.node] = {e.outcome, e.stage};
                break;
            default:
                break;
        }
    }
    if (next_) next_->on_event(e);
}

std::string RunMetrics::render() const {
    std::string out;
    std::lock_guard<std::mutex> lock(mu_);
    out +=
        "# HELP kiln_nodes Nodes this worker has touched, by state and current or last stage.\n"
        "# TYPE kiln_nodes gauge\n";
    std::map<std::pair<std::string, std::string>, int> by;
    for (const auto& [node, ss] : nodes_) ++by[ss];
    for (const auto& [ss, n] : by)
        out += fmt::format("kiln_nodes{{state=\"{}\",stage=\"{}\"}} {}\n", label(ss.first), label(ss.second), n);

    out +=
        "# HELP kiln_stage_results_total Stage attempts ended, by stage and outcome.\n"
        "# TYPE kiln_stage_results_total counter\n";
    for (const auto& [so, n] : results_)
        out += fmt::format("kiln_stage_results_total{{stage=\"{}\",outcome=\"{}\"}} {}\n", label(so.first),
                           label(so.second), n);

    out +=
        "# HELP kiln_stage_duration_seconds How long stage attempts took, from start to result.\n"
        "# TYPE kiln_stage_duration_seconds histogram\n";
    for (const auto& [stage, h] : durations_) {
        int64_t cumulative = 0;
        for (size_t i = 0; i < buckets().size(); ++i) {
            cumulative += h.counts[i];
            out += fmt::format("kiln_stage_duration_seconds_bucket{{stage=\"{}\",le=\"{}\"}} {}\n", label(stage),
                               buckets()[i], cumulative);
        }
        out +=
            fmt::format("kiln_stage_duration_seconds_bucket{{stage=\"{}\",le=\"+Inf\"}} {}\n", label(stage), h.count);
        out += fmt::format("kiln_stage_duration_seconds_sum{{stage=\"{}\"}} {}\n", label(stage), h.sum);
        out += fmt::format("kiln_stage_duration_seconds_count{{stage=\"{}\"}} {}\n", label(stage), h.count);
    }

    if (counters_) {
        const auto c = counters_();
        out +=
            "# HELP kiln_lease_renewals_total Node leases this worker's heartbeat extended.\n"
            "# TYPE kiln_lease_renewals_total counter\n";
        out += fmt::format("kiln_lease_renewals_total {}\n", c.renewals);
        out +=
            "# HELP kiln_lease_losses_total Node leases found taken over by another worker (fenced).\n"
            "# TYPE kiln_lease_losses_total counter\n";
        out += fmt::format("kiln_lease_losses_total {}\n", c.losses);
        out +=
            "# HELP kiln_journal_reconnects_total Connections to the store made again after it went away.\n"
            "# TYPE kiln_journal_reconnects_total counter\n";
        out += fmt::format("kiln_journal_reconnects_total {}\n", c.reconnects);
        out +=
            "# HELP kiln_journal_statements_total Statements sent on the journal connection (one round trip each).\n"
            "# TYPE kiln_journal_statements_total counter\n";
        out += fmt::format("kiln_journal_statements_total {}\n", c.statements);
        out +=
            "# HELP kiln_journal_commits_total Journal commits, by whether they waited for the server's flush.\n"
            "# TYPE kiln_journal_commits_total counter\n";
        out += fmt::format("kiln_journal_commits_total{{flushed=\"true\"}} {}\n", c.commits_flushed);
        out += fmt::format("kiln_journal_commits_total{{flushed=\"false\"}} {}\n", c.commits_unflushed);
    }
    return out;
}

}  // namespace kiln::engine
