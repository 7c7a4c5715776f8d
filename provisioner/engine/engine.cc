#include "provisioner/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include <fmt/format.h>

#include "provisioner/core/idle_connection_budget.h"
#include "provisioner/engine/backoff.h"
#include "provisioner/engine/exclusive_locks.h"
#include "provisioner/engine/input_hash.h"
#include "provisioner/engine/open_files.h"
#include "provisioner/engine/parking_lot.h"
#include "provisioner/engine/scheduler.h"
#include "provisioner/engine/worker_pool.h"
#include "provisioner/journal/leases.h"

namespace kiln::engine {

namespace {

using Clock = std::chrono::steady_clock;

std::string format_duration(std::chrono::milliseconds d) {
    auto ms = d.count();
    if (ms % 3600000 == 0 && ms >= 3600000) return fmt::format("{}h", ms / 3600000);
    if (ms % 60000 == 0 && ms >= 60000) return fmt::format("{}m", ms / 60000);
    if (ms % 1000 == 0 && ms >= 1000) return fmt::format("{}s", ms / 1000);
    return fmt::format("{}ms", ms);
}

// An action parked by StageContext::park, with what its resume needs. The
// node keeps its scheduler slots, its lease and its fleet-wide slots.
struct ParkedAction {
    std::vector<Action> actions;  // the attempt's plan
    size_t index = 0;             // the parked one
    int64_t row = 0;              // its journal row, still open
    StageContext::ParkRequest request;
    std::optional<std::string> last_verified;
    int64_t started = 0;   // the attempt's start (its stage row)
    int actions_done = 0;  // applied by this attempt before it
    int parks = 1;         // of this action in a row (one per poll)
    std::string shown;     // what the last "waiting:" said it waited for
    bool slots_held = false;
};

// What a park waits for, less the state in its closing parenthesis:
// "BIOS: update task /T/7 (Running)" -> "BIOS: update task /T/7".
std::string park_subject(const std::string& reason) {
    const size_t open = reason.rfind(" (");
    if (open == std::string::npos || reason.empty() || reason.back() != ')') return reason;
    return reason.substr(0, open);
}

// How one attempt at a node-stage ended.
struct Attempt {
    // Held: not this worker's turn (another holds the node's lease, a
    // fleet-wide limit is full, or the lease went unconfirmed): try later.
    // LeaseLost: this worker's lease was taken over (fenced).
    // Parked: an action waits in the parking lot, holding no thread.
    enum class Kind { Verified, Skipped, Failed, Retry, Interrupted, TimedOut, Quarantined, Held, LeaseLost, Parked };
    Kind kind = Kind::Failed;
    std::string error;
    int actions = 0;
    bool claimed = false;             // this attempt took the node's lease
    bool out_of_service = false;      // ... and its fleet-wide max_unavailable slot
    bool awaits_unavailable = false;  // Held: the fleet-wide max_unavailable is full
    bool held_by_other = false;       // Held: another worker holds the node's lease
    int64_t holder_generation = 0;    // ... at this lease generation
    // Skipped: another worker verified this node-stage with these inputs
    // under the lease this worker found it held by, or a later one; nothing
    // of it is this worker's to journal.
    bool verified_elsewhere = false;
    // The claim found the node's generation past the run's start: another
    // worker held it meanwhile, and may have verified its later stages.
    bool claimed_after_other = false;
    std::shared_ptr<ParkedAction> parked;
};

const char* outcome_name(Attempt::Kind k) {
    switch (k) {
        case Attempt::Kind::Verified:
            return "verified";
        case Attempt::Kind::Skipped:
            return "skipped";
        case Attempt::Kind::Failed:
            return "failed";
        case Attempt::Kind::Retry:
            return "retry";
        case Attempt::Kind::Interrupted:
            return "interrupted";
        case Attempt::Kind::TimedOut:
            return "timed_out";
        case Attempt::Kind::Quarantined:
            return "quarantined";
        case Attempt::Kind::Held:
            return "held";
        case Attempt::Kind::LeaseLost:
            return "lease_lost";
        case Attempt::Kind::Parked:
            return "parked";
    }
    return "failed";
}

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
    return std::any_of(entries.begin(), entries.end(), [](const PlanEntry& e) { return e.status == "work"; });
}

bool PlanReport::has_errors() const {
    return std::any_of(entries.begin(), entries.end(), [](const PlanEntry& e) { return e.status == "error"; });
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
            inputs = config::node_section_json(fleet_, node, name).dump();
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
                e.status = "error";
                e.error_code = "stage.not_implemented";
                e.error = fmt::format("stage '{}' is not implemented in this build", e.stage);
                continue;
            }
            if (store_) {
                auto last = store_->last_verified_hash(e.node, e.stage);
                if (!last) {
                    e.status = "error";
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
            ctx.set_node_pending([&](const std::string& other) { return selected.count(other) > 0; });
            auto observed = stage->observe(ctx);
            Result<std::vector<Action>> actions =
                observed ? stage->plan(ctx, *observed) : Result<std::vector<Action>>(observed.error());
            gate.release(job);
            if (observed) e.notes = observed->notes;
            if (!actions) {
                e.status = "error";
                e.error_code = actions.error().code;
                e.error = actions.error().str();
            } else {
                e.actions = std::move(*actions);
                // Converged only when nothing is to be done and this
                // exact input was verified before.
                bool verified = !options.reimage && e.last_verified == e.input_hash;
                e.status = (e.actions.empty() && verified) ? "converged" : "work";
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
                    if (e.status == "work") ++summary.work;
                    if (e.status == "converged") ++summary.converged;
                    if (e.status == "error") ++summary.errors;
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

Result<RunReport> Engine::run(const RunOptions& options) {
    if (!store_) return make_error("engine", "journal.required", "a run needs a journal");
    // Opened before select: stages may share work across nodes' input hashes too.
    const StageRegistry::RunScope scope(registry_, fleet_);
    auto sel = select(options);
    if (!sel) return sel.error();
    const auto& selection = *sel;
    if (auto s = check_implemented(selection); !s) return s.error();
    // `parallel` bounds nodes in flight, not threads; the open-file limit
    // bounds the threads (open_files.h): a parked node holds no descriptor.
    const int in_flight = std::max(1, std::min<int>(fleet_.limits.parallel, static_cast<int>(selection.size())));
    const int core_threads = std::min(WorkerPool::default_core(), in_flight);
    auto open_files = raise_open_file_limit(
        in_flight, core_threads,
        fmt::format("[limits] in {}", fleet_.limits.pos.line > 0 ? fleet_.limits.pos.str() : fleet_.path));
    if (!open_files) return open_files.error();
    // The HTTP client's idle connections get the share the threads leave.
    set_idle_connection_budget(open_files->idle_connections);

    // Everything is validated: from here on the run is journaled.
    // Each node's state before this run, by the fleet's own name string:
    // all that is read of it (whole rows were 25 MB at 100,000 nodes).
    std::unordered_map<std::string_view, std::string> previous;
    if (auto states = store_->node_states()) {
        previous.reserve(states->size());
        for (auto& s : *states)
            if (const config::Node* n = fleet_.find_node(s.node)) previous.emplace(n->name, std::move(s.state));
    } else {
        return states.error();
    }
    if (options.reimage) {
        for (const auto& s : selection)
            for (const auto& st : s.stages) {
                auto f = store_->forget_verified(s.node->name, st);
                if (!f) return f.error();
            }
    }
    struct NodeRun {
        const Selection* sel = nullptr;
        size_t next = 0;  // index into sel->stages
        int attempt = 1;  // of the current stage
        // The current stage's deadline, set when its first attempt starts and
        // kept across its retries: `timeout` bounds the stage, retries included.
        std::optional<Clock::time_point> deadline;
        int actions = 0;
        bool done = false;
        bool all_skipped = true;
        bool handed_over = false;
        bool leased = false;          // this worker holds the node's lease (shared stores)
        bool out_of_service = false;  // ... and a fleet-wide max_unavailable slot for it
        // Shared stores: a stage verified under this lease generation or a
        // later one was verified during this run, by another worker (0: no
        // such check). One past the node's generation when the run began,
        // or the generation another worker was found holding it at.
        int64_t done_since = 0;
        // This worker's lease came after another worker's in this run: what
        // that one verified is looked up before each stage, lease or not.
        bool after_other = false;
        std::shared_ptr<ParkedAction> parked;  // set while an action waits in the parking lot
        NodeOutcome outcome;
    };
    std::vector<NodeRun> runs(selection.size());
    int total = 0;
    std::unordered_map<std::string_view, size_t> run_of;  // node name -> index in runs
    run_of.reserve(selection.size());
    for (size_t i = 0; i < selection.size(); ++i) {
        runs[i].sel = &selection[i];
        runs[i].outcome.node = selection[i].node->name;
        run_of.emplace(selection[i].node->name, i);
        total += static_cast<int>(selection[i].stages.size());
    }

    std::mt19937_64 rng(options.seed ? options.seed : std::random_device{}());
    Scheduler sched(fleet_.limits);
    // Null for a store this process owns (SQLite, under its run lock).
    journal::Leases* const leases = store_->leases();
    // A spine's read, diff and write, one node at a time in this process
    // and, on a shared store, across workers (stage.h hold_exclusive).
    const ExclusiveLocks exclusive(leases, options.lease_ttl);
    if (leases) {
        // What other workers verify from now on counts as done here, and
        // so does what a live holder verifies under the lease it holds now
        // (it is mid-run on these inputs; not this worker's own, left by a
        // process of the same name that died). Unread (the store away),
        // every node is observed as without workers.
        if (auto rows = leases->lease_rows()) {
            std::unordered_map<std::string_view, int64_t> since;
            for (const auto& row : *rows) {
                const bool other_live = !row.worker.empty() && row.worker != leases->worker_id();
                since.emplace(row.node, other_live ? row.generation : row.generation + 1);
            }
            for (auto& r : runs) {
                auto g = since.find(r.outcome.node);
                r.done_since = g == since.end() ? 1 : g->second;
            }
        }
    }
    // Journaled once the leases are read: a run on record has its starting
    // point for the above (tests gate on it).
    auto run_id_r = store_->begin_run({options.command, fleet_.path, fleet_.sha256, KILN_VERSION});
    if (!run_id_r) return run_id_r.error();
    const int64_t run_id = *run_id_r;
    // Shared with the stop listener, which may fire from another thread
    // while this run is returning.
    struct Wake {
        std::mutex mu;
        std::condition_variable cv;
        std::vector<std::string> pokes;  // other workers' wake-ups (Leases::on_wake), unread
    };
    auto wake = std::make_shared<Wake>();
    std::mutex& mu = wake->mu;
    std::condition_variable& cv = wake->cv;
    struct Completion {
        size_t index;
        Attempt attempt;
    };
    std::deque<Completion> completions;
    ParkingLot lot;          // parked actions, under mu
    bool lot_woken = false;  // a stage called wake(key): the dispatcher looks at the lot
    stop_.add_listener([wake] {
        std::lock_guard<std::mutex> lock(wake->mu);
        wake->cv.notify_all();
    });

    std::atomic<int> done_count{0};
    emit({EngineEvent::Kind::RunStart, "", "", fleet_.name, "", -1, 0, total});

    // Journal writes are never dropped: a resume trusts what the journal
    // says. One that fails fails its node (journal.write) and stops the run
    // (nothing new starts, in-flight actions finish), which then ends
    // "failed". The node's failure is taken when its attempt completes.
    std::mutex journal_mu;
    std::atomic<bool> journal_stop{false};              // raised by a failed write, not yet announced
    std::string journal_error;                          // the first failure, for the run
    std::map<std::string, std::string> journal_failed;  // node -> its first failure
    auto journaled = [&](const Status& st, const std::string& node, const std::string& what) {
        if (st) return true;
        const std::string msg = fmt::format("journal.write: the journal did not record {}{}: {}", what,
                                            node.empty() ? "" : " of " + node, st.error().message);
        bool first = false;
        {
            std::lock_guard<std::mutex> l(journal_mu);
            first = journal_error.empty();
            if (first) journal_error = msg;
            if (!node.empty()) journal_failed.emplace(node, msg);
        }
        if (first) {
            emit({EngineEvent::Kind::Warning, node, "", msg + "; stopping the run", "", -1, done_count.load(), total});
            // Raised here, announced by the dispatcher: this may run under
            // `mu`, which the stop's listeners take.
            auto& level = stop_.level();
            int was = level.load();
            while (was < 1 && !level.compare_exchange_weak(was, 1)) {
            }
            journal_stop.store(true);
            cv.notify_all();
        }
        return false;
    };
    auto take_journal_failure = [&](const std::string& node) -> std::optional<std::string> {
        std::lock_guard<std::mutex> l(journal_mu);
        auto it = journal_failed.find(node);
        if (it == journal_failed.end()) return std::nullopt;
        std::string msg = std::move(it->second);
        journal_failed.erase(it);
        return msg;
    };
    // A lease given back late is not lost: it expires after lease_ttl. Said,
    // not fatal.
    auto released = [&](const Status& st, const std::string& node, const std::string& what) {
        if (!st)
            emit({EngineEvent::Kind::Warning, node, "",
                  fmt::format("{} not given back ({}): it expires after the lease ttl", what, st.error().message), "",
                  -1, done_count.load(), total});
    };

    auto job_for = [&](size_t i) {
        const auto& r = runs[i];
        const auto& stage_name = r.sel->stages[r.next];
        const Stage* stage = registry_.find(stage_name);
        return Job{r.sel->node->name, r.sel->node->rack, stage->resources(fleet_, *r.sel->node)};
    };

    // One attempt at one node-stage, on a worker thread; or the resume of
    // its parked action (r.parked), which carries on from that action.
    auto execute = [&](size_t i) -> Attempt {
        NodeRun& r = runs[i];
        // Only this task touches the node until it completes.
        const std::shared_ptr<ParkedAction> resume = std::move(r.parked);
        const config::Node& node = *r.sel->node;
        const std::string& stage_name = r.sel->stages[r.next];
        const std::string hash = r.sel->hashes[r.next].hex();
        Stage* stage = registry_.find(stage_name);
        const auto timeout = fleet_.limits.timeout_for(stage_name);
        const int64_t started = resume ? resume->started : journal::now_ms();
        const int done_before = done_count.load();

        StageContext ctx(
            fleet_, node, stage_name, stop_, r.deadline.value_or(Clock::now() + timeout),
            [&](const std::string& msg, int pct) {
                emit({EngineEvent::Kind::Progress, node.name, stage_name, msg, "", pct, done_count.load(), total});
            },
            [&](const std::string& kind, const std::string& msg) {
                journaled(store_->record_event({run_id, journal::now_ms(), node.name, stage_name, kind, msg}),
                          node.name, "a " + kind + " event");
            });
        ctx.set_reimage(options.reimage);
        ctx.set_node_pending([&](const std::string& other) {
            auto at = run_of.find(other);
            if (at == run_of.end()) return false;
            std::lock_guard<std::mutex> l(mu);
            return !runs[at->second].done;
        });
        ctx.set_hold_exclusive(
            [&exclusive](const StageContext& c, const std::string& key) { return exclusive.acquire(c, key); });
        ctx.set_can_park(true);
        ctx.set_wake([&](const std::string& key) {
            std::lock_guard<std::mutex> l(mu);
            if (lot.wake(key) > 0) {
                lot_woken = true;
                cv.notify_all();
            }
        });

        Attempt a;
        a.actions = resume ? resume->actions_done : 0;
        auto classify = [&](const Error& err) {
            if (err.code == "lease.lost") {
                a.kind = Attempt::Kind::LeaseLost;
                a.error = err.message;
            } else if (stop_.hard()) {
                a.kind = Attempt::Kind::Interrupted;
                a.error = "stopped during the stage: " + err.message;
            } else if (ctx.deadline_passed()) {
                a.kind = Attempt::Kind::TimedOut;
                a.error = fmt::format("timed out after {} ({})", format_duration(timeout), err.message);
            } else if (err.quarantine) {
                a.kind = Attempt::Kind::Quarantined;
                a.error = err.message;
            } else if (err.transient && r.attempt <= fleet_.limits.retries &&
                       Clock::now() + fleet_.limits.backoff_initial >= ctx.deadline()) {
                // Retries share the stage's deadline: none fits before it.
                a.kind = Attempt::Kind::TimedOut;
                a.error = fmt::format("timed out after {} (attempt {}: {}; no time left for another)",
                                      format_duration(timeout), r.attempt, err.message);
            } else if (err.transient && r.attempt <= fleet_.limits.retries) {
                a.kind = Attempt::Kind::Retry;
                a.error = err.message;
            } else {
                a.kind = Attempt::Kind::Failed;
                a.error =
                    err.transient ? fmt::format("{} (gave up after {} attempts)", err.message, r.attempt) : err.message;
            }
            return a;
        };

        auto finish = [&]() -> Attempt {
            if (a.kind == Attempt::Kind::Retry || a.kind == Attempt::Kind::LeaseLost || a.verified_elsewhere) return a;
            journal::StageRecord rec{run_id,  node.name, stage_name, hash,    outcome_name(a.kind),
                                     a.error, r.attempt, a.actions,  started, journal::now_ms()};
            if (auto s = store_->record_stage(rec); !s) {
                // A journal that went away under the write (transient) is
                // retried like a stage error: the next attempt observes the
                // node again and records its result then.
                const Attempt::Kind was = a.kind;
                classify(s.error());
                if (a.kind == Attempt::Kind::Failed && !s.error().transient) a.error = s.error().str();
                if (a.kind == Attempt::Kind::Retry)
                    a.error = "recording " + std::string(outcome_name(was)) + ": " + s.error().message;
            }
            return a;
        };

        auto fail = [&](const Error& err) {
            classify(err);
            return finish();
        };

        // Fleet-wide limits, across workers: a slot of each for this stage,
        // given back however the attempt ends, unless an action parks.
        struct SlotRelease {
            journal::Leases* leases;
            const std::string& node;
            decltype(released)& said;
            bool held = false;
            ~SlotRelease() {
                if (held) said(leases->release_slots(node), node, "the fleet-wide limit slots");
            }
        } slots{leases, node.name, released, resume && resume->slots_held};

        std::vector<Action> planned;
        size_t first = 0;
        if (resume) {
            // A parked action comes back: its wait ended, or the deadline
            // or a stop came first (then apply is not called again; the
            // next run observes what the wait was for).
            planned = std::move(resume->actions);
            first = resume->index;
            ctx.set_hashes(hash, resume->last_verified);
            const Action& action = planned[first];
            const std::string& why = resume->request.reason;
            if (stop_.soft()) {
                journaled(store_->end_action(resume->row, "interrupted", "stopped while waiting: " + why), node.name,
                          "the end of action " + action.id);
                a.kind = Attempt::Kind::Interrupted;
                a.error = fmt::format("stopped while waiting in action {} ({}; {} of {} done)", action.id, why, first,
                                      planned.size());
                return finish();
            }
            if (ctx.deadline_passed()) {
                auto msg = fmt::format("timed out after {} (waiting in action {}: {})", format_duration(timeout),
                                       action.id, why);
                journaled(store_->end_action(resume->row, "failed", msg), node.name, "the end of action " + action.id);
                a.kind = Attempt::Kind::TimedOut;
                a.error = msg;
                return finish();
            }
            if (leases) {
                if (auto fresh = leases->check_fresh(node.name); !fresh) {
                    journaled(store_->end_action(resume->row, "interrupted", fresh.error().message), node.name,
                              "the end of action " + action.id);
                    a.kind = Attempt::Kind::Held;
                    a.error = fresh.error().message;
                    return a;
                }
            }
        } else {
            // What another worker verified during this run (under a lease
            // claimed since it began, or the one this worker found the node
            // held by), with these very inputs, is done for the fleet's
            // workers together. Without this every worker re-observed every
            // node the others had finished (bench/scale: one stage attempt
            // per worker per node-stage). Null: not verified elsewhere.
            auto done_elsewhere = [&]() -> std::optional<Attempt> {
                auto done = leases->verified_since(node.name, stage_name, hash, r.done_since);
                if (!done) return classify(done.error());
                if (!*done) return std::nullopt;
                a.kind = Attempt::Kind::Skipped;
                a.verified_elsewhere = true;
                return finish();
            };
            if (leases && r.done_since > 0 && (!r.leased || r.after_other))
                if (auto skipped = done_elsewhere()) return *skipped;
            if (leases) {
                // The lease, max_unavailable across workers (the node's slot,
                // kept over its stages until it is back in service) and the
                // stage's fleet-wide slots: one transaction (Leases::claim_stage).
                const Job job{node.name, node.rack, stage->resources(fleet_, node)};
                auto claimed = leases->claim_stage(node.name, stage_name, options.lease_ttl,
                                                   fleet_.limits.max_unavailable, sched.limits_of(job));
                if (!claimed) return classify(claimed.error());
                if (const auto* holder = std::get_if<journal::LeaseHolder>(&claimed->lease)) {
                    a.kind = Attempt::Kind::Held;
                    a.error = "held by worker " + holder->worker;
                    a.held_by_other = true;
                    a.holder_generation = holder->generation;
                    return a;
                }
                a.claimed = true;
                if (claimed->unavailable_full) {
                    a.kind = Attempt::Kind::Held;
                    a.error = "fleet-wide limit unavailable is full";
                    a.awaits_unavailable = true;
                    return a;
                }
                if (fleet_.limits.max_unavailable > 0) a.out_of_service = true;
                if (claimed->full) {
                    a.kind = Attempt::Kind::Held;
                    a.error = "fleet-wide limit " + *claimed->full + " is full";
                    return a;
                }
                slots.held = true;
                // The look above came before this claim: a worker that held
                // the node until now may have verified this stage meanwhile.
                // (Under a lease this worker already held, nobody could.)
                if (!r.leased && r.done_since > 0 &&
                    std::get<journal::Lease>(claimed->lease).generation > r.done_since) {
                    a.claimed_after_other = true;
                    if (auto skipped = done_elsewhere()) return *skipped;
                }
            }
            auto last = store_->last_verified_hash(node.name, stage_name);
            if (!last) return classify(last.error());
            ctx.set_hashes(hash, *last);
            emit({EngineEvent::Kind::StageStart, node.name, stage_name, "", "", -1, done_before, total});

            auto observed = stage->observe(ctx);
            if (!observed) return fail(observed.error());
            for (const auto& note : observed->notes) {
                ctx.event("warning", note);
                emit({EngineEvent::Kind::Warning, node.name, stage_name, note, "", -1, done_before, total});
            }
            auto plan_r = stage->plan(ctx, *observed);
            if (!plan_r) return fail(plan_r.error());
            if (plan_r->empty() && *last && **last == hash && !options.reimage) {
                a.kind = Attempt::Kind::Skipped;
                return finish();
            }
            // The journal hears "running" once there is work: a converged
            // stage costs one read and its result row, nothing more.
            if (!journaled(store_->set_node_state({node.name, "running", r.attempt > 1 ? "retrying" : "", stage_name,
                                                   "", journal::now_ms(), run_id}),
                           node.name, "the state running")) {
                a.kind = Attempt::Kind::Failed;  // nothing applied: the journal would not know of it
                a.error = *take_journal_failure(node.name);
                return a;
            }
            planned = std::move(*plan_r);
        }

        for (size_t k = first; k < planned.size(); ++k) {
            const auto& action = planned[k];
            int64_t row = 0;
            if (resume && k == first) {
                // Its start is journaled already; its end comes below.
                row = resume->row;
                ctx.set_resumed(resume->request.state);
            } else {
                if (stop_.soft()) {
                    a.kind = Attempt::Kind::Interrupted;
                    a.error = fmt::format("stopped before action {} ({} of {} done)", action.id, k, planned.size());
                    return finish();
                }
                auto begun = store_->begin_action(run_id, node.name, stage_name, action.id, action.description);
                if (!begun) return fail(begun.error());
                row = *begun;
                if (leases) {
                    if (auto fresh = leases->check_fresh(node.name); !fresh) {
                        // Not confirmed lately (this process stalled?): claim
                        // again, then observe, rather than act on a lease that
                        // may be someone else's by now.
                        journaled(store_->end_action(row, "interrupted", fresh.error().message), node.name,
                                  "the end of action " + action.id);
                        a.kind = Attempt::Kind::Held;
                        a.error = fresh.error().message;
                        return a;
                    }
                }
                emit(
                    {EngineEvent::Kind::Action, node.name, stage_name, action.description, "", -1, done_before, total});
            }
            auto applied = stage->apply(ctx, action);
            ctx.set_resumed(std::nullopt);
            if (auto request = ctx.take_park(); request && !applied) {
                // The action waits outside kiln: its thread goes back to the
                // pool, its slots and lease stay held.
                auto p = std::make_shared<ParkedAction>();
                p->request = std::move(*request);
                p->actions = std::move(planned);
                p->index = k;
                p->row = row;
                p->last_verified = ctx.last_verified_hash();
                p->started = started;
                p->actions_done = a.actions;
                p->slots_held = std::exchange(slots.held, false);
                p->parks = (resume && k == first) ? resume->parks + 1 : 1;
                if (resume && k == first) p->shown = resume->shown;
                a.kind = Attempt::Kind::Parked;
                a.parked = std::move(p);
                return a;
            }
            journaled(store_->end_action(row, applied ? "ok" : (stop_.hard() ? "interrupted" : "failed"),
                                         applied ? "" : applied.error().message),
                      node.name, "the end of action " + action.id);
            if (!applied) return fail(applied.error());
            ++a.actions;
        }
        auto verified = stage->verify(ctx);
        if (!verified) return fail(verified.error());
        a.kind = Attempt::Kind::Verified;
        return finish();
    };

    std::deque<size_t> ready;
    for (size_t i = 0; i < runs.size(); ++i) ready.push_back(i);
    // Nodes held back by a full limit, per limit key, in arrival order. A
    // finish frees one unit of each limit its job held: it wakes one node
    // of that key, not every one (which made a long rollout quadratic).
    std::map<std::string, std::deque<size_t>> blocked;
    std::vector<std::string> woken_from(runs.size());  // the key a ready node was woken for
    std::multimap<Clock::time_point, size_t> waiting;  // retry backoff
    // Nodes in `waiting` for another worker rather than for a backoff:
    // true when for a lease another worker holds, false for a fleet-wide
    // slot (or a lease to confirm). A wake-up sends them to ready early.
    std::map<size_t, bool> held_waits;
    auto wake_held = [&](const std::vector<std::string>& pokes) {
        std::set<std::string> released;
        bool slots = false;
        for (const auto& p : pokes) {
            if (p.rfind("node:", 0) == 0)
                released.insert(p.substr(5));
            else
                slots = true;  // "slots", "run": anything may fit now
        }
        for (auto it = waiting.begin(); it != waiting.end();) {
            auto h = held_waits.find(it->second);
            if (h != held_waits.end() && (h->second ? released.count(runs[it->second].outcome.node) != 0 : slots)) {
                ready.push_back(it->second);
                held_waits.erase(h);
                it = waiting.erase(it);
            } else {
                ++it;
            }
        }
    };
    int inflight = 0;  // attempts on the pool
    int actions_total = 0, stages_run = 0, stages_skipped = 0, stages_done_elsewhere = 0;

    auto unpark = [&](const std::string& key) {
        auto it = blocked.find(key);
        if (it == blocked.end()) return;
        const size_t i = it->second.front();
        it->second.pop_front();
        if (it->second.empty()) blocked.erase(it);
        ready.push_front(i);
        woken_from[i] = key;
    };

    auto end_node = [&](NodeRun& r, const std::string& state, const std::string& detail, const std::string& stage,
                        const std::string& error) {
        r.done = true;
        r.outcome.state = state;
        r.outcome.detail = detail;
        r.outcome.stage = stage;
        r.outcome.error = error;
        r.outcome.actions = r.actions;
        // Under leases, only the holder writes a node's state, then gives
        // the node back; a node never claimed here is another worker's.
        if (!leases || r.leased) {
            if (!journaled(
                    store_->set_node_state({r.outcome.node, state, detail, stage, error, journal::now_ms(), run_id}),
                    r.outcome.node, "the state " + state)) {
                // The journal keeps an older state: the report says so.
                r.outcome.state = "failed";
                const std::string msg = *take_journal_failure(r.outcome.node);
                r.outcome.error = error.empty() ? msg : error + "; " + msg;
            }
        }
        if (leases && r.leased) {
            released(leases->release(r.outcome.node), r.outcome.node, "the node's lease");
            r.leased = false;
        }
        emit({EngineEvent::Kind::NodeEnd, r.outcome.node, stage, error, state, -1, done_count.load(), total});
    };

    // The node is back in service (or no longer this worker's): its
    // max_unavailable unit, here and fleet-wide, is free again.
    auto back_in_service = [&](NodeRun& r) {
        sched.release(r.outcome.node);
        if (leases && r.out_of_service)
            released(leases->release_unavailable(r.outcome.node), r.outcome.node,
                     "the fleet-wide max_unavailable slot");
        r.out_of_service = false;
    };

    // Keeps this worker's leases alive while the pool works, and wakes it
    // when another worker frees what it waits for.
    std::optional<journal::LeaseHeartbeat> heartbeat;
    if (leases) {
        heartbeat.emplace(*leases, options.lease_ttl);
        leases->on_wake([wake](const std::string& what) {
            std::lock_guard<std::mutex> lock(wake->mu);
            if (std::find(wake->pokes.begin(), wake->pokes.end(), what) == wake->pokes.end())
                wake->pokes.push_back(what);  // coalesced until the loop reads them
            wake->cv.notify_all();
        });
    }
    {
        // Threads for the cores; `parallel` bounds nodes in flight, parked
        // ones included (they keep their scheduler slots).
        WorkerPool pool(core_threads, open_files->threads);
        std::unique_lock<std::mutex> lock(mu);
        bool stop_announced = false;
        auto submit = [&](size_t i) {
            ++inflight;
            pool.submit([&, i] {
                Attempt a = execute(i);
                std::lock_guard<std::mutex> l(mu);
                completions.push_back({i, std::move(a)});
                cv.notify_all();
            });
        };
        for (;;) {
            if (journal_stop.exchange(false)) {
                // Wakes waits on the stop (StopToken::wait_for) and this
                // loop's listener, outside `mu`.
                lock.unlock();
                stop_.notify();
                lock.lock();
            }
            if (stop_.soft() && !stop_announced) {
                stop_announced = true;
                // Parked waits are not actions in progress: they end now,
                // as interrupted (docs/engine.md).
                lot.wake_all();
                journaled(store_->record_event({run_id, journal::now_ms(), "", "", "stop",
                                                "stop requested: no new work; in-flight actions finish"}),
                          "", "the stop");
                emit({EngineEvent::Kind::Stop, "", "", "stopping: in-flight actions finish, nothing new starts", "", -1,
                      done_count.load(), total});
            }
            const auto now = Clock::now();
            while (!waiting.empty() && waiting.begin()->first <= now) {
                ready.push_back(waiting.begin()->second);
                held_waits.erase(waiting.begin()->second);
                waiting.erase(waiting.begin());
            }
            if (!wake->pokes.empty()) {
                wake_held(wake->pokes);
                wake->pokes.clear();
            }
            // Parked actions whose wait is over (time, event, deadline or
            // stop) resume on the pool; they hold their slots already.
            lot_woken = false;
            for (size_t i : lot.take_due(now)) submit(i);
            while (!stop_.soft() && !ready.empty()) {
                size_t i = ready.front();
                Job job = job_for(i);
                std::string b = sched.blocker(job);
                if (b == "parallel") break;
                ready.pop_front();
                const std::string from = std::exchange(woken_from[i], std::string());
                if (!b.empty()) {
                    // Back to the front when the unit it was woken for went
                    // to another; else queue on the new limit and wake the
                    // next node for the unit still free.
                    if (b == from) {
                        blocked[b].push_front(i);
                    } else {
                        blocked[b].push_back(i);
                        if (!from.empty()) unpark(from);
                    }
                    continue;
                }
                sched.start(job);
                if (!runs[i].deadline)
                    runs[i].deadline = Clock::now() + fleet_.limits.timeout_for(runs[i].sel->stages[runs[i].next]);
                submit(i);
            }
            if (inflight == 0 && completions.empty() && lot.empty() &&
                (stop_.soft() || (ready.empty() && waiting.empty())))
                break;

            if (completions.empty()) {
                std::optional<Clock::time_point> until;
                if (!waiting.empty() && !stop_.soft()) until = waiting.begin()->first;
                if (auto due = lot.next_due()) until = until ? std::min(*until, *due) : *due;
                auto woken = [&] {
                    return !completions.empty() || lot_woken || !wake->pokes.empty() ||
                           (stop_.soft() && !stop_announced);
                };
                if (until)
                    cv.wait_until(lock, *until, woken);
                else
                    cv.wait(lock, woken);
            }
            while (!completions.empty()) {
                Completion c = std::move(completions.front());
                completions.pop_front();
                --inflight;
                NodeRun& r = runs[c.index];
                if (c.attempt.claimed) r.leased = true;
                if (c.attempt.claimed_after_other) r.after_other = true;
                if (c.attempt.out_of_service) r.out_of_service = true;
                if (c.attempt.kind == Attempt::Kind::Parked) {
                    // Still in flight: its slots stay taken, its actions are
                    // counted when the stage ends. A stop resumes it at once
                    // (to end it); otherwise the earlier of its wake-up time
                    // and the stage deadline.
                    const auto& req = c.attempt.parked->request;
                    const auto at = stop_.soft() ? Clock::now() : std::min(req.until, *r.deadline);
                    lot.park(c.index, at, req.key);
                    // Said once per thing waited for, not once per poll (a
                    // flash waits for its task, then the BMC's restart, then
                    // the job the host's reset runs): a stage that polls says
                    // more itself.
                    if (std::string subject = park_subject(req.reason); subject != c.attempt.parked->shown) {
                        emit({EngineEvent::Kind::Progress, r.outcome.node, r.sel->stages[r.next],
                              "waiting: " + req.reason, "", -1, done_count.load(), total});
                        c.attempt.parked->shown = std::move(subject);
                    }
                    r.parked = std::move(c.attempt.parked);
                    continue;
                }
                Job job = job_for(c.index);
                sched.finish(job);
                unpark("rack:" + job.rack);
                for (const auto& res : job.resources) unpark(res);
                const std::string stage_name = r.sel->stages[r.next];
                const Stage* stage = registry_.find(stage_name);
                r.actions += c.attempt.actions;
                actions_total += c.attempt.actions;
                if (c.attempt.kind != Attempt::Kind::LeaseLost) {
                    // A journal write of this attempt failed: the node fails
                    // with it, whatever the stage said.
                    if (auto jf = take_journal_failure(r.outcome.node)) {
                        const bool failed_already = c.attempt.kind == Attempt::Kind::Failed ||
                                                    c.attempt.kind == Attempt::Kind::TimedOut ||
                                                    c.attempt.kind == Attempt::Kind::Quarantined;
                        c.attempt.error = failed_already ? c.attempt.error + "; " + *jf : *jf;
                        if (!failed_already) c.attempt.kind = Attempt::Kind::Failed;
                    }
                }
                switch (c.attempt.kind) {
                    case Attempt::Kind::Parked:  // handled above
                        break;
                    case Attempt::Kind::Held:
                        // Another worker has the node (its lease ends when it
                        // finishes the node or dies), a fleet-wide limit is
                        // full, or our lease needs confirming: ask again later.
                        // A first attempt that never ran has not started the
                        // stage's clock.
                        if (r.attempt == 1) r.deadline.reset();
                        // Another worker holds the node: not out of service
                        // by this worker's hand, so not counted here. (One
                        // waiting for the fleet-wide unit stays counted, so
                        // this worker does not claim more nodes meanwhile.)
                        if (!r.out_of_service && !c.attempt.awaits_unavailable) {
                            sched.release(r.outcome.node);
                            unpark("unavailable");
                        }
                        waiting.emplace(Clock::now() + options.lease_poll, c.index);
                        held_waits[c.index] = c.attempt.held_by_other;
                        if (c.attempt.held_by_other && c.attempt.holder_generation > 0)
                            r.done_since = std::min(r.done_since, c.attempt.holder_generation);
                        break;
                    case Attempt::Kind::LeaseLost:
                        // Fenced: the journal is the new holder's now.
                        ++done_count;
                        leases->forget(r.outcome.node);
                        r.leased = false;
                        emit({EngineEvent::Kind::StageEnd, r.outcome.node, stage_name, c.attempt.error, "lease_lost",
                              -1, done_count.load(), total});
                        end_node(r, "pending", "lease lost", stage_name, c.attempt.error);
                        back_in_service(r);
                        break;
                    case Attempt::Kind::Retry: {
                        auto delay =
                            backoff_delay(r.attempt, fleet_.limits.backoff_initial, fleet_.limits.backoff_max, rng);
                        auto msg = fmt::format("attempt {} failed: {}; retrying in {}", r.attempt, c.attempt.error,
                                               format_duration(delay));
                        ++r.attempt;
                        journaled(
                            store_->record_event({run_id, journal::now_ms(), r.outcome.node, stage_name, "retry", msg}),
                            r.outcome.node, "a retry event");
                        journaled(store_->set_node_state({r.outcome.node, "running", "waiting", stage_name,
                                                          c.attempt.error, journal::now_ms(), run_id}),
                                  r.outcome.node, "the state running");
                        emit({EngineEvent::Kind::Retry, r.outcome.node, stage_name, msg, "", -1, done_count.load(),
                              total});
                        waiting.emplace(Clock::now() + delay, c.index);
                        break;
                    }
                    case Attempt::Kind::Verified:
                    case Attempt::Kind::Skipped: {
                        const bool skipped = c.attempt.kind == Attempt::Kind::Skipped;
                        ++(c.attempt.verified_elsewhere ? stages_done_elsewhere
                           : skipped                    ? stages_skipped
                                                        : stages_run);
                        r.all_skipped = r.all_skipped && skipped;
                        if (stage->hands_over()) r.handed_over = true;
                        int d = ++done_count;
                        emit({EngineEvent::Kind::StageEnd, r.outcome.node, stage_name,
                              c.attempt.verified_elsewhere
                                  ? std::string("verified by another worker")
                                  : fmt::format("{} action{}", c.attempt.actions, c.attempt.actions == 1 ? "" : "s"),
                              outcome_name(c.attempt.kind), -1, d, total});
                        r.attempt = 1;
                        r.deadline.reset();
                        if (++r.next < r.sel->stages.size()) {
                            ready.push_front(c.index);  // depth first: finish nodes, free their slots
                            break;
                        }
                        auto prev = previous.find(r.outcome.node);
                        bool was_ready = prev != previous.end() && prev->second == "ready";
                        if (r.handed_over || (r.all_skipped && was_ready))
                            end_node(r, "ready", r.all_skipped ? "converged" : "handed over", stage_name, "");
                        else
                            end_node(r, "pending", "verified", stage_name, "");
                        back_in_service(r);
                        unpark("unavailable");
                        break;
                    }
                    case Attempt::Kind::Interrupted:
                        ++done_count;
                        emit({EngineEvent::Kind::StageEnd, r.outcome.node, stage_name, c.attempt.error, "interrupted",
                              -1, done_count.load(), total});
                        end_node(r, "pending", "interrupted", stage_name, c.attempt.error);
                        back_in_service(r);
                        break;
                    case Attempt::Kind::Quarantined:
                    case Attempt::Kind::Failed:
                    case Attempt::Kind::TimedOut: {
                        ++done_count;
                        const bool q = c.attempt.kind == Attempt::Kind::Quarantined;
                        emit({EngineEvent::Kind::StageEnd, r.outcome.node, stage_name, c.attempt.error,
                              outcome_name(c.attempt.kind), -1, done_count.load(), total});
                        // A failed node stays out of service: it keeps its
                        // max_unavailable slot so a rollout halts.
                        end_node(r, q ? "quarantined" : "failed", outcome_name(c.attempt.kind), stage_name,
                                 stage_name + ": " + c.attempt.error);
                        break;
                    }
                }
            }
        }
        lock.unlock();
        // pool joins here: every task has completed (inflight == 0).
    }
    stop_.clear_listeners();
    if (leases) leases->on_wake(nullptr);
    heartbeat.reset();

    // Nodes a retry was waiting on when a stop came: record where they are.
    for (auto& [when, i] : waiting) {
        auto& r = runs[i];
        end_node(r, "pending", "interrupted", r.sel->stages[r.next], "stopped while waiting to retry");
    }

    // Nodes stopped between two stages: give their leases back now rather
    // than let them expire. Failed nodes kept their max_unavailable slots
    // for the run, as one process keeps them; the run ends here.
    for (auto& r : runs) {
        if (leases && r.leased && !r.done) {
            released(leases->release(r.outcome.node), r.outcome.node, "the node's lease");
            r.leased = false;
        }
        if (leases && r.out_of_service) back_in_service(r);
    }

    RunReport report;
    report.run_id = run_id;
    report.actions = actions_total;
    report.stages_run = stages_run;
    report.stages_skipped = stages_skipped;
    report.stages_done_elsewhere = stages_done_elsewhere;
    bool any_failed = false;
    for (auto& r : runs) {
        if (!r.done) {
            // Never started (stop) or parked behind max_unavailable: the
            // journal keeps its previous state.
            auto prev = previous.find(r.outcome.node);
            r.outcome.state = prev != previous.end() ? prev->second : "pending";
            r.outcome.detail = stop_.soft() ? "not started" : "blocked: max_unavailable reached";
            r.outcome.stage = r.sel->stages[r.next];
            if (!stop_.soft()) any_failed = true;
        }
        if (r.outcome.state == "failed" || r.outcome.state == "quarantined") any_failed = true;
        report.nodes.push_back(r.outcome);
    }
    report.status = stop_.soft() ? "interrupted" : (any_failed ? "failed" : "completed");
    {
        std::lock_guard<std::mutex> l(journal_mu);
        if (!journal_error.empty()) report.status = "failed";  // stopped by the journal, not by a person
    }
    journaled(store_->end_run(run_id, report.status), "", "the run's end");
    emit({EngineEvent::Kind::RunEnd, "", "", report.status, report.status, -1, done_count.load(), total});
    return report;
}

}  // namespace kiln::engine
