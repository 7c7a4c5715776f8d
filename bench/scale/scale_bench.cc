// bench/scale: one process of the scale benchmark (bench/scale/run.sh runs
// several). N nodes x 6 no-op stages through the real engine, either as one
// `kiln worker` on a PostgreSQL store (--store: leases, fleet-wide slots,
// fencing, wake-ups, exactly as the CLI's worker) or as one process on an
// SQLite journal (--sqlite: the single-machine baseline, same run). Every
// process builds the same fleet; a no-op stage is converged once its input
// hash was verified, so whichever worker runs a node-stage, it runs once.
// Writes its own figures (wall time, actions, peak RSS) as JSON.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "provisioner/engine/engine.h"
#include "provisioner/journal/leases.h"
#include "provisioner/journal/pg_store.h"
#include "provisioner/journal/sqlite_store.h"

namespace {

using Clock = std::chrono::steady_clock;

// One action the first time; converged once the journal verified this input.
class NoopStage : public kiln::engine::Stage {
public:
    explicit NoopStage(std::string name) : name_(std::move(name)) {}
    std::string name() const override { return name_; }
    kiln::Result<kiln::engine::Observation> observe(kiln::engine::StageContext&) override {
        return kiln::engine::Observation{};
    }
    kiln::Result<std::vector<kiln::engine::Action>> plan(kiln::engine::StageContext& ctx,
                                                         const kiln::engine::Observation&) override {
        if (ctx.last_verified_hash() == ctx.input_hash()) return std::vector<kiln::engine::Action>{};
        return std::vector<kiln::engine::Action>{{"noop", "no-op"}};
    }
    kiln::Status apply(kiln::engine::StageContext&, const kiln::engine::Action&) override { return {}; }
    kiln::Status verify(kiln::engine::StageContext&) override { return {}; }

private:
    std::string name_;
};

kiln::config::Fleet make_fleet(int nodes, int parallel, const std::vector<std::string>& stages) {
    kiln::config::Fleet f;
    f.name = "scale";
    f.path = "scale-fleet.toml";
    f.dir = "/nonexistent";
    f.limits.parallel = parallel;
    for (int r = 0; r < 100; ++r) f.racks.push_back({"r" + std::to_string(r), {}, {}});
    kiln::config::Pipeline p;
    p.name = "bench";
    p.stages = stages;
    f.pipelines[p.name] = p;
    for (int i = 0; i < nodes; ++i) {
        kiln::config::Node n;
        n.name = "node-" + std::to_string(i);
        n.rack = "r" + std::to_string(i % 100);
        n.role = "bench";
        f.nodes.push_back(n);
    }
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln scale benchmark: one worker process"};
    int nodes = 10000, parallel = 64;
    std::string store_url, sqlite, worker_id, out;
    app.add_option("--nodes", nodes, "nodes in the generated fleet");
    app.add_option("--parallel", parallel, "limits.parallel (fleet-wide on PostgreSQL)");
    app.add_option("--store", store_url, "PostgreSQL URL: run as one worker");
    app.add_option("--sqlite", sqlite, "journal file: run as one process on SQLite (baseline)");
    app.add_option("--worker-id", worker_id, "this worker's name");
    app.add_option("--out", out, "where to write this process's figures (JSON)")->required();
    CLI11_PARSE(app, argc, argv);
    if (store_url.empty() == sqlite.empty()) {
        std::fprintf(stderr, "give --store or --sqlite\n");
        return 1;
    }

    const std::vector<std::string> stages = {"noop1", "noop2", "noop3", "noop4", "noop5", "noop6"};
    kiln::engine::StageRegistry registry;
    for (const auto& s : stages) registry.add(std::make_shared<NoopStage>(s));
    const auto fleet = make_fleet(nodes, parallel, stages);

    auto store =
        store_url.empty() ? kiln::journal::open_sqlite_store(sqlite, {}) : kiln::journal::open_pg_store(store_url, {});
    if (!store) return std::fprintf(stderr, "%s\n", store.error().str().c_str()), 1;
    kiln::engine::RunOptions opts;
    opts.command = store_url.empty() ? "apply" : "worker";
    if (auto* leases = (*store)->leases()) {
        if (!worker_id.empty()) leases->set_worker_id(worker_id);
        opts.lease_ttl = std::chrono::seconds(30);
        opts.lease_poll = std::chrono::milliseconds(200);
    }
    kiln::engine::StopToken stop;
    kiln::engine::Engine engine(fleet, registry, store->get(), nullptr, stop);
    const auto t = Clock::now();
    auto report = engine.run(opts);
    const double wall = std::chrono::duration<double>(Clock::now() - t).count();
    if (!report) return std::fprintf(stderr, "%s\n", report.error().str().c_str()), 1;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    // The journal connection's work (PostgreSQL only): statements sent and
    // commits flushed or not, for the per-node-stage figures run.sh derives.
    kiln::journal::LeaseCounters c;
    if (auto* leases = (*store)->leases()) c = leases->counters();
    nlohmann::json j = {{"worker", worker_id},
                        {"statements", c.statements},
                        {"commits_flushed", c.commits_flushed},
                        {"commits_unflushed", c.commits_unflushed},
                        {"store", store_url.empty() ? "sqlite" : "postgresql"},
                        {"status", kiln::engine::to_string(report->status)},
                        {"wall_s", wall},
                        {"actions", report->actions},
                        {"stages_run", report->stages_run},
                        {"stages_skipped", report->stages_skipped},
                        {"stages_done_elsewhere", report->stages_done_elsewhere},
                        {"peak_rss_mb", ru.ru_maxrss / 1024.0}};
    std::ofstream(out) << j.dump(2) << "\n";
    return report->status == kiln::engine::RunStatus::Completed ? 0 : 1;
}
