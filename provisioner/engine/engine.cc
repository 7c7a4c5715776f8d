#include "provisioner/engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "provisioner/engine/input_hash.h"
#include "provisioner/engine/scheduler.h"
#include "provisioner/engine/stage_records.h"
#include "provisioner/engine/worker_pool.h"

namespace kiln::engine {

namespace {

using Clock = std::chrono::steady_clock;

// A plan-time gate: per-resource caps for observe (BMCs are fragile even
// when only read), with no node leaving service.
class ResourceGate {
public:
    explicit ResourceGate(const config::Limits& limits) : sched_(relaxed(limits)) {}
    void acquire(const Job& job) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return sched_.blocker(job).empty(); });
        sched_.start(job);
    }
    void release(const Job& job) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            sched_.finish(job);
        }
        cv_.notify_all();
    }

private:
    static config::Limits relaxed(config::Limits l) {
        l.max_unavailable = 0;
        l.per_rack = 0;
        l.parallel = 1 << 30;  // the thread count bounds it
        return l;
    }
    std::mutex mu_;
    std::condition_variable cv_;
    Scheduler sched_;
};

StopToken& no_stop() {
    static StopToken token;
    return token;
}

}  // namespace

bool PlanReport::has_work() const {
    return std::any_of(entries.begin(), entries.end(), [](const PlanEntry& e) { return e.status == PlanStatus::Work; });
}

bool PlanReport::has_errors() const {
    return std::any_of(entries.begin(), entries.end(),
                       [](const PlanEntry& e) { return e.status == PlanStatus::Error; });
}

Engine::Engine(const config::Fleet& fleet, const StageRegistry& registry, journal::Store* store, EventSink* sink,
               StopToken& stop)
    : fleet_(fleet), registry_(registry), store_(store), sink_(sink), stop_(stop) {}

void Engine::emit(const EngineEvent& e) const {
    if (sink_) sink_->on_event(e);
}

Result<std::vector<Engine::Selection>> Engine::select(const RunOptions& options) const {
    std::vector<const config::Node*> nodes;
    if (options.nodes.empty()) {
        for (const auto& n : fleet_.nodes) nodes.push_back(&n);
    } else {
        // Indexed: a selection of many nodes from a large fleet is not a
        // scan of the fleet per name.
        std::unordered_map<std::string_view, const config::Node*> by_name;
        by_name.reserve(fleet_.nodes.size());
        for (const auto& n : fleet_.nodes) by_name.emplace(n.name, &n);
        std::set<std::string> seen;
        for (const auto& name : options.nodes) {
            auto found = by_name.find(name);
            const auto* n = found == by_name.end() ? nullptr : found->second;
            if (!n) {
                std::string known;
                for (size_t i = 0; i < fleet_.nodes.size() && i < 8; ++i)
                    known += (i ? ", " : "") + fleet_.nodes[i].name;
                if (fleet_.nodes.size() > 8) known += ", ...";
                return make_error("engine", "node.unknown",
                                  fmt::format("no node '{}' in fleet {}; nodes: {}", name, fleet_.path, known));
            }
            if (seen.insert(name).second) nodes.push_back(n);
        }
    }
    for (const auto& s : options.stages) {
        if (!registry_.known_names().count(s))
            return make_error("engine", "stage.unknown", fmt::format("no stage named '{}'", s));
    }

    std::vector<Selection> out;
    out.reserve(nodes.size());
    for (const auto* n : nodes) {
        const std::string pipeline_name = options.pipeline.empty() ? n->role : options.pipeline;
        auto pit = fleet_.pipelines.find(pipeline_name);
        if (pit == fleet_.pipelines.end())
            return make_error(
                "engine", "pipeline.unknown",
                fmt::format("node {}: no pipeline '{}' in {}", n->name, pipeline_name, fleet_.pipelines_dir));
        const auto& pipeline = pit->second;
        Selection sel{n, &pipeline, {}, {}};
        for (const auto& s : pipeline.stages) {
            if (options.stages.empty() ||
                std::find(options.stages.begin(), options.stages.end(), s) != options.stages.end())
                sel.stages.push_back(s);
        }
        if (sel.stages.empty())
            return make_error(
                "engine", "stage.not_in_pipeline",
                fmt::format("node {}: pipeline '{}' has none of the selected stages", n->name, pipeline.name));
        auto hashes = pipeline_hashes(*n, pipeline, sel.stages);
        if (!hashes) return hashes.error();
        sel.hashes = std::move(*hashes);
        // A run of another pipeline (kiln reimage) records, for the stages
        // the node's own pipeline shares, the hashes that pipeline chains:
        // otherwise the next plan of the node's role sees "inputs changed"
        // and redoes smoke and handover after every reimage.
        if (auto own = fleet_.pipelines.find(n->role); own != fleet_.pipelines.end() && &own->second != &pipeline) {
            const auto& stages = own->second.stages;
            auto own_hashes = pipeline_hashes(*n, own->second, stages);  // one per stage, in order
            if (!own_hashes) return own_hashes.error();
            for (size_t k = 0; k < sel.stages.size(); ++k) {
                auto at = std::find(stages.begin(), stages.end(), sel.stages[k]);
                if (at != stages.end()) sel.hashes[k] = (*own_hashes)[static_cast<size_t>(at - stages.begin())];
            }
        }
        out.push_back(std::move(sel));
    }
    return out;
}

Result<std::vector<StageHash>> Engine::pipeline_hashes(const config::Node& node, const config::Pipeline& pipeline,
                                                       const std::vector<std::string>& selected) const {
    // The chain runs over the whole pipeline so a node-stage's hash does not
    // depend on which stages a command selected.
    std::vector<StageHash> out;
    std::string previous;
    for (const auto& name : pipeline.stages) {
        std::string inputs;
        if (const Stage* stage = registry_.find(name)) {
            StageContext ctx(fleet_, node, name, no_stop(), Clock::time_point::max(), nullptr, nullptr);
            auto r = stage->input_text(ctx);
            if (!r) return r.error();
            inputs = std::move(*r);
        } else {
            inputs = node_identity_inputs(node).dump();
        }
        previous = chain_hash_text(name, inputs, previous);
        if (std::find(selected.begin(), selected.end(), name) != selected.end()) out.emplace_back(previous);
    }
    return out;
}

Status Engine::check(const RunOptions& options) const {
    auto sel = select(options);
    if (!sel) return sel.error();
    return check_implemented(*sel);
}

Status Engine::check_implemented(const std::vector<Selection>& selection) const {
    std::map<std::string, std::vector<std::string>> missing;  // stage -> nodes
    for (const auto& s : selection) {
        for (const auto& st : s.stages) {
            if (!registry_.implemented(st)) missing[st].push_back(s.node->name);
        }
    }
    if (missing.empty()) return ok_status();
    const auto& [stage, nodes] = *missing.begin();
    return make_error(
        "engine", "stage.not_implemented",
        fmt::format("stage '{}' is not implemented in this build (selected for {} node{}: {}{}); "
                    "select others with --stage",
                    stage, nodes.size(), nodes.size() == 1 ? "" : "s", nodes.front(), nodes.size() > 1 ? ", ..." : ""));
}

Result<PlanReport> Engine::plan(const RunOptions& options) {
    PlanReport report;
    auto summary = plan(options, [&](std::vector<PlanEntry>& entries) {
        for (auto& e : entries) report.entries.push_back(std::move(e));
    });
    if (!summary) return summary.error();
    return report;
}

Result<PlanSummary> Engine::plan(const RunOptions& options, const PlanSink& sink) {
    // Opened before select: stages may share work across nodes' input hashes too.
    const StageRegistry::RunScope scope(registry_, fleet_);
    auto sel = select(options);
    if (!sel) return sel.error();
    const auto& selection = *sel;

    // In a plan every selected node is pending (StageContext::node_pending).
    std::unordered_set<std::string> selected;
    for (const auto& s : selection) selected.insert(s.node->name);
    ResourceGate gate(fleet_.limits);

    auto plan_node = [&](const Selection& s, std::vector<PlanEntry>& entries) {
        entries.resize(s.stages.size());
        for (size_t k = 0; k < s.stages.size(); ++k) {
            PlanEntry& e = entries[k];
            e.node = s.node->name;
            e.stage = s.stages[k];
            e.input_hash = s.hashes[k].hex();
            Stage* stage = registry_.find(e.stage);
            if (!stage) {
                e.status = PlanStatus::Error;
                e.error_code = "stage.not_implemented";
                e.error = fmt::format("stage '{}' is not implemented in this build", e.stage);
                continue;
            }
            if (store_) {
                auto last = store_->last_verified_hash(e.node, e.stage);
                if (!last) {
                    e.status = PlanStatus::Error;
                    e.error_code = last.error().code;
                    e.error = last.error().str();
                    continue;
                }
                if (*last) e.last_verified = **last;
            }
            Job job{e.node, s.node->rack, stage->resources(fleet_, *s.node)};
            gate.acquire(job);
            auto deadline = Clock::now() + fleet_.limits.timeout_for(e.stage);
            StageContext ctx(fleet_, *s.node, e.stage, stop_, deadline, nullptr, nullptr);
            ctx.set_hashes(e.input_hash,
                           e.last_verified.empty() ? std::nullopt : std::optional<std::string>(e.last_verified));
            ctx.set_reimage(options.reimage);
            wire_records(ctx, store_, 0);
            ctx.set_node_pending([&](const std::string& other) { return selected.count(other) > 0; });
            auto observed = stage->observe(ctx);
            Result<std::vector<Action>> actions =
                observed ? stage->plan(ctx, *observed) : Result<std::vector<Action>>(observed.error());
            gate.release(job);
            if (observed) e.notes = observed->notes;
            if (!actions) {
                e.status = PlanStatus::Error;
                e.error_code = actions.error().code;
                e.error = actions.error().str();
            } else {
                e.actions = std::move(*actions);
                // Converged only when nothing is to be done and this
                // exact input was verified before.
                bool verified = !options.reimage && e.last_verified == e.input_hash;
                e.status = (e.actions.empty() && verified) ? PlanStatus::Converged : PlanStatus::Work;
            }
        }
    };

    // Observe cannot park, so plan blocks a thread per BMC read; but
    // `parallel` is a limit on nodes in flight now (thousands), not a thread
    // count: at most kPlanThreads reads at once.
    constexpr int kPlanThreads = 64;
    const int threads = std::max(1, std::min({fleet_.limits.parallel, static_cast<int>(selection.size()),
                                              std::max(kPlanThreads, WorkerPool::default_core())}));
    // Nodes are taken in order and handed to the sink in order. A node
    // planned ahead of a slow one waits in `done`; no thread takes a node
    // more than `window` ahead of the next one due, so what waits stays
    // bounded whatever the fleet's size.
    const size_t window = 4 * static_cast<size_t>(threads);
    std::mutex mu;
    std::condition_variable room;
    size_t next = 0, delivered = 0;
    std::map<size_t, std::vector<PlanEntry>> done;
    PlanSummary summary;
    auto work = [&] {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            room.wait(lock, [&] { return next >= selection.size() || next < delivered + window; });
            if (next >= selection.size()) return;
            const size_t i = next++;
            lock.unlock();
            std::vector<PlanEntry> entries;
            plan_node(selection[i], entries);
            lock.lock();
            done.emplace(i, std::move(entries));
            // One thread hands over at a time, under the lock: in order.
            for (auto it = done.begin(); it != done.end() && it->first == delivered; it = done.erase(it)) {
                for (const auto& e : it->second) {
                    if (e.status == PlanStatus::Work) ++summary.work;
                    if (e.status == PlanStatus::Converged) ++summary.converged;
                    if (e.status == PlanStatus::Error) ++summary.errors;
                    summary.actions += static_cast<int>(e.actions.size());
                }
                sink(it->second);
                ++delivered;
            }
            room.notify_all();
        }
    };
    {
        std::vector<std::thread> pool;
        for (int t = 1; t < threads; ++t) pool.emplace_back(work);
        work();
        for (auto& t : pool) t.join();
    }
    return summary;
}

}  // namespace kiln::engine
