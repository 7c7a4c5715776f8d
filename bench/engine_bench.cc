// bench/engine: 10,000 nodes x 6 no-op stages through the real engine with
// the journal on disk. Measures a cold run (every stage applies one action
// and verifies), a warm run (every stage skipped after observe), config
// loading, peak RSS and journal size; and, as a baseline measured in the
// same process, the same journal writes made directly without the engine,
// so the figures can be read as ratios on a noisy shared machine.
// Then parked waits (issue 20): --park-nodes nodes whose one stage waits
// --park-ms, at parallel = park-nodes, once parking (the thread goes back to
// the pool) and once holding its thread (ctx.wait_for, as stages did before
// parking) at --park-parallel; wall time as a ratio of the wait itself (the
// bound), and the peak thread count read from /proc/self/task.
#include <sys/resource.h>

#include <dirent.h>

#include <malloc.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/engine.h"
#include "provisioner/journal/sqlite_store.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Does nothing real: one action per node the first time, then converged.
// What it "did" is one byte per node, by the node's place in the fleet: the
// machines' state is not kiln's memory, so it must not weigh in its figure
// (a set of names per stage was 48 MB at 100,000 nodes).
class NoopStage : public kiln::engine::Stage {
public:
    explicit NoopStage(std::string name) : name_(std::move(name)) {}
    std::string name() const override { return name_; }
    kiln::Result<kiln::engine::Observation> observe(kiln::engine::StageContext&) override {
        return kiln::engine::Observation{};
    }
    kiln::Result<std::vector<kiln::engine::Action>> plan(kiln::engine::StageContext& ctx,
                                                         const kiln::engine::Observation&) override {
        std::lock_guard<std::mutex> lock(mu_);
        if (done(ctx)) return std::vector<kiln::engine::Action>{};
        return std::vector<kiln::engine::Action>{{"noop", "no-op"}};
    }
    kiln::Status apply(kiln::engine::StageContext& ctx, const kiln::engine::Action&) override {
        std::lock_guard<std::mutex> lock(mu_);
        done(ctx) = 1;
        return {};
    }
    kiln::Status verify(kiln::engine::StageContext&) override { return {}; }

private:
    uint8_t& done(const kiln::engine::StageContext& ctx) {
        const auto& nodes = ctx.fleet().nodes;
        if (done_.size() != nodes.size()) done_.assign(nodes.size(), 0);
        return done_[static_cast<size_t>(&ctx.node() - nodes.data())];
    }
    std::string name_;
    std::mutex mu_;
    std::vector<uint8_t> done_;
};

// One action per node that waits `wait` outside kiln: parks (or, with
// `block`, sleeps in ctx.wait_for holding its thread), then is done.
class WaitStage : public kiln::engine::Stage {
public:
    WaitStage(std::chrono::milliseconds wait, bool block) : wait_(wait), block_(block) {}
    std::string name() const override { return "wait"; }
    kiln::Result<kiln::engine::Observation> observe(kiln::engine::StageContext&) override {
        return kiln::engine::Observation{};
    }
    kiln::Result<std::vector<kiln::engine::Action>> plan(kiln::engine::StageContext&,
                                                         const kiln::engine::Observation&) override {
        return std::vector<kiln::engine::Action>{{"wait", "wait"}};
    }
    kiln::Status apply(kiln::engine::StageContext& ctx, const kiln::engine::Action&) override {
        if (ctx.resumed()) return {};
        if (block_) {
            ctx.wait_for(wait_);
            return {};
        }
        return ctx.park_for(wait_, nlohmann::json::object(), "bench wait");
    }
    kiln::Status verify(kiln::engine::StageContext&) override { return {}; }

private:
    std::chrono::milliseconds wait_;
    bool block_;
};

int thread_count() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/task")) {
        while (const dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') ++n;
        ::closedir(d);
    }
    return n;
}

struct WaitFigures {
    double wall_s = 0;
    int peak_threads = 0;
    bool ok = false;
};

// `nodes` nodes each waiting `wait_ms` at `parallel`, on a fresh journal.
WaitFigures run_waits(const fs::path& work, int nodes, int parallel, int wait_ms, bool block) {
    kiln::config::Fleet fleet;
    fleet.name = "bench-wait";
    fleet.path = (work / "wait-fleet.toml").string();
    fleet.limits.parallel = parallel;
    fleet.racks.push_back({"r0", {}, {}});
    kiln::config::Pipeline p;
    p.name = "wait";
    p.stages = {"wait"};
    fleet.pipelines[p.name] = p;
    for (int i = 0; i < nodes; ++i) {
        kiln::config::Node n;
        n.name = "node-" + std::to_string(i);
        n.rack = "r0";
        n.role = "wait";
        fleet.nodes.push_back(n);
    }
    kiln::engine::StageRegistry registry;
    registry.add(std::make_shared<WaitStage>(std::chrono::milliseconds(wait_ms), block));
    const fs::path journal = work / (block ? "wait-block.db" : "wait-park.db");
    auto store = kiln::journal::open_sqlite_store(journal.string(), {});
    WaitFigures f;
    if (!store) return f;
    kiln::engine::StopToken stop;
    kiln::engine::Engine engine(fleet, registry, store->get(), nullptr, stop);
    std::atomic<bool> done{false};
    std::atomic<int> peak{0};
    std::thread sampler([&] {
        while (!done) {
            peak = std::max(peak.load(), thread_count());
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    });
    auto t = Clock::now();
    auto r = engine.run({});
    f.wall_s = std::chrono::duration<double>(Clock::now() - t).count();
    done = true;
    sampler.join();
    f.peak_threads = peak;
    f.ok = r && r->status == kiln::engine::RunStatus::Completed && r->actions == nodes;
    return f;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// VmRSS or VmHWM of this process in KB, from /proc/self/status; -1 unread.
long status_kb(const char* field) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1);
    return -1;
}

// Each phase's own peak: the high-water mark is reset before it
// (clear_refs "5", Linux 4.0+), so a figure is not the earlier phases'.
struct PhaseMemory {
    nlohmann::json figures = nlohmann::json::object();
    void begin() { std::ofstream("/proc/self/clear_refs") << "5"; }
    void end(const std::string& phase) {
        figures[phase] = {{"peak_mb", status_kb("VmHWM:") / 1024.0},
                          {"after_mb", status_kb("VmRSS:") / 1024.0},
                          {"anon_after_mb", status_kb("RssAnon:") / 1024.0},
                          {"file_after_mb", status_kb("RssFile:") / 1024.0},
                          {"shmem_after_mb", status_kb("RssShmem:") / 1024.0}};
    }
};

uintmax_t size_or_zero(const fs::path& p) {
    std::error_code ec;
    auto s = fs::file_size(p, ec);
    return ec ? 0 : s;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln engine benchmark"};
    int nodes = 10000, parallel = 64;
    int park_nodes = 2000, park_ms = 1000, park_parallel = 64;
    std::string out = "bench/results/engine.json", work = "build/bench-work";
    app.add_option("--nodes", nodes, "nodes in the generated fleet");
    app.add_option("--parallel", parallel, "limits.parallel");
    app.add_option("--out", out, "where to write the figures (JSON)");
    app.add_option("--work", work, "scratch folder on disk for the fleet and journal");
    app.add_option("--park-nodes", park_nodes, "nodes in the parked-wait runs (0 = skip them)");
    app.add_option("--park-ms", park_ms, "how long each of those nodes waits");
    app.add_option("--park-parallel", park_parallel, "limits.parallel of the run whose waits hold their thread");
    CLI11_PARSE(app, argc, argv);

    const std::vector<std::string> stages = {"noop1", "noop2", "noop3", "noop4", "noop5", "noop6"};
    fs::remove_all(work);
    fs::create_directories(fs::path(work) / "pipelines");
    {
        std::ofstream p(fs::path(work) / "pipelines" / "bench.toml");
        p << "schema = 1\nname = \"bench\"\nstages = [";
        for (size_t i = 0; i < stages.size(); ++i) p << (i ? ", " : "") << '"' << stages[i] << '"';
        p << "]\n";
        std::ofstream f(fs::path(work) / "fleet.toml");
        f << "schema = 1\n[fleet]\nname = \"bench\"\npipelines = \"pipelines\"\n[limits]\nparallel = " << parallel
          << "\nper_bmc = 2\n";
        for (int r = 0; r < 100; ++r) f << "[[racks]]\nname = \"r" << r << "\"\n";
        for (int i = 0; i < nodes; ++i)
            f << "[[nodes]]\nname = \"node-" << i << "\"\nrack = \"r" << i % 100 << "\"\nrole = \"bench\"\n";
    }

    kiln::engine::StageRegistry registry;
    for (const auto& s : stages) registry.add(std::make_shared<NoopStage>(s));

    PhaseMemory memory;
    memory.begin();
    auto t_load = Clock::now();
    kiln::config::LoadOptions lo;
    lo.known_stages = registry.known_names();
    auto loaded = kiln::config::load_fleet((fs::path(work) / "fleet.toml").string(), lo);
    if (!loaded.fleet) {
        for (const auto& d : loaded.errors) std::fprintf(stderr, "%s\n", d.str().c_str());
        return 1;
    }
    const double load_s = seconds_since(t_load);
    memory.end("config_load");
    memory.begin();
    const auto& fleet = *loaded.fleet;
    const int node_stages = nodes * static_cast<int>(stages.size());

    // Baseline: the journal writes a cold run makes, straight to the store.
    double baseline_s = 0;
    {
        auto store = kiln::journal::open_sqlite_store((fs::path(work) / "baseline.db").string(), {});
        if (!store) return std::fprintf(stderr, "%s\n", store.error().str().c_str()), 1;
        auto& st = **store;
        auto t = Clock::now();
        auto run = st.begin_run({"bench", "fleet.toml", "", KILN_VERSION});
        for (const auto& n : fleet.nodes) {
            for (const auto& s : stages) {
                (void)st.last_verified_hash(n.name, s);
                (void)st.set_node_state({n.name, "running", "", s, "", kiln::journal::now_ms(), *run});
                auto row = st.begin_action(*run, n.name, s, "noop", "no-op");
                (void)st.end_action(*row, "ok", "");
                (void)st.record_stage({*run, n.name, s, "hash", "verified", "", 1, 1, 0, kiln::journal::now_ms()});
            }
            (void)st.set_node_state({n.name, "ready", "", stages.back(), "", kiln::journal::now_ms(), *run});
        }
        (void)st.end_run(*run, "completed");
        baseline_s = seconds_since(t);
    }
    memory.end("baseline_journal");
    memory.begin();

    const fs::path journal = fs::path(work) / "journal.db";
    auto store = kiln::journal::open_sqlite_store(journal.string(), {});
    if (!store) return std::fprintf(stderr, "%s\n", store.error().str().c_str()), 1;
    kiln::engine::StopToken stop;
    kiln::engine::Engine engine(fleet, registry, store->get(), nullptr, stop);

    auto t_cold = Clock::now();
    auto cold = engine.run({});
    const double cold_s = seconds_since(t_cold);
    memory.end("cold_run");
    memory.begin();
    if (!cold || cold->status != kiln::engine::RunStatus::Completed || cold->actions != node_stages) {
        std::fprintf(stderr, "cold run did not complete every action\n");
        return 1;
    }
    auto t_warm = Clock::now();
    auto warm = engine.run({});
    const double warm_s = seconds_since(t_warm);
    memory.end("warm_run");
    memory.begin();
    if (!warm || warm->actions != 0 || warm->stages_skipped != node_stages) {
        std::fprintf(stderr, "warm run was not a no-op\n");
        return 1;
    }
    auto t_plan = Clock::now();
    // As `kiln plan` does: node by node, nothing kept.
    size_t planned = 0;
    auto plan = engine.plan({}, [&](std::vector<kiln::engine::PlanEntry>& entries) { planned += entries.size(); });
    const double plan_s = seconds_since(t_plan);
    memory.end("plan");
    if (!plan || plan->work != 0 || plan->errors != 0 || planned != static_cast<size_t>(node_stages)) {
        std::fprintf(stderr, "plan after apply found work\n");
        return 1;
    }

    const auto journal_bytes = size_or_zero(journal) + size_or_zero(journal.string() + "-wal");
    // The highest of the phases' own peaks (each reset the high-water mark).
    double peak_mb = 0;
    for (const auto& [phase, f] : memory.figures.items()) peak_mb = std::max(peak_mb, f["peak_mb"].get<double>());

    // Parked waits: the bound is one wait (every node waits at once).
    WaitFigures parked, held;
    if (park_nodes > 0) {
        parked = run_waits(work, park_nodes, park_nodes, park_ms, false);
        held = run_waits(work, park_nodes, park_parallel, park_ms, true);
        if (!parked.ok || !held.ok) {
            std::fprintf(stderr, "a parked-wait run did not complete every node\n");
            return 1;
        }
    }
    nlohmann::json j = {
        {"benchmark", "engine"},
        {"nodes", nodes},
        {"stages", stages.size()},
        {"node_stages", node_stages},
        {"parallel", parallel},
        {"config_load_s", load_s},
        {"cold_run_s", cold_s},
        {"warm_run_s", warm_s},
        {"plan_s", plan_s},
        {"baseline_direct_journal_s", baseline_s},
        {"cold_overhead_us_per_node_stage", cold_s * 1e6 / node_stages},
        {"warm_overhead_us_per_node_stage", warm_s * 1e6 / node_stages},
        {"cold_vs_baseline_ratio", cold_s / baseline_s},
        {"warm_vs_baseline_ratio", warm_s / baseline_s},
        {"peak_rss_mb", peak_mb},
        {"peak_rss_target_mb", 300},
        {"memory_by_phase", memory.figures},
        {"journal_bytes", journal_bytes},
        {"journal_mb", journal_bytes / 1048576.0},
    };
    if (park_nodes > 0) {
        const double bound = park_ms / 1000.0;
        j["waits"] = {
            {"nodes", park_nodes},
            {"wait_s", bound},
            {"cores", std::thread::hardware_concurrency()},
            {"parked",
             {{"parallel", park_nodes},
              {"wall_s", parked.wall_s},
              {"vs_wait_bound_ratio", parked.wall_s / bound},
              {"peak_threads", parked.peak_threads}}},
            {"holding_threads",
             {{"parallel", park_parallel},
              {"wall_s", held.wall_s},
              {"vs_wait_bound_ratio", held.wall_s / bound},
              {"peak_threads", held.peak_threads}}},
            {"held_vs_parked_wall_ratio", held.wall_s / parked.wall_s},
        };
    }
    fs::create_directories(fs::path(out).parent_path());
    std::ofstream(out) << j.dump(2) << "\n";
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
}
