// Engine::run: one run over the selected nodes, in named parts.
//
//   Engine::run       validates, reads the nodes' states, hands over to Run
//   Run::begin        reads other workers' leases, journals the run's start
//   Run::loop         the dispatcher: starts what fits the limits, waits,
//                     and records each attempt as it completes
//   StageAttempt      one attempt at one node-stage, on a worker thread:
//                     claim, observe, plan, apply, verify (or a parked
//                     action's resume)
//   Run::record       what an attempt's outcome does to its node
//   Run::end          leftovers after the loop, the report, the run's end
//
// Journal writes are never dropped (Run::journaled): one that fails fails
// its node and stops the run.
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
#include <variant>

#include <fmt/format.h>

#include "provisioner/core/idle_connection_budget.h"
#include "provisioner/engine/backoff.h"
#include "provisioner/engine/engine.h"
#include "provisioner/engine/exclusive_locks.h"
#include "provisioner/engine/open_files.h"
#include "provisioner/engine/parking_lot.h"
#include "provisioner/engine/scheduler.h"
#include "provisioner/engine/stage_records.h"
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
    int64_t holder_generation = 0;    // ... taken at this lease generation (LeaseHolder::held_from)
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

}  // namespace

class Engine::Run {
public:
    Run(Engine& engine, const RunOptions& options, const std::vector<Selection>& selection,
        std::unordered_map<std::string_view, std::string> previous)
        : engine_(engine),
          fleet_(engine.fleet_),
          registry_(engine.registry_),
          store_(engine.store_),
          stop_(engine.stop_),
          options_(options),
          previous_(std::move(previous)),
          runs_(selection.size()),
          rng_(options.seed ? options.seed : std::random_device{}()),
          sched_(fleet_.limits),
          leases_(store_->leases()),
          exclusive_(leases_, options.lease_ttl),
          wake_(std::make_shared<Wake>()) {
        run_of_.reserve(selection.size());
        for (size_t i = 0; i < selection.size(); ++i) {
            runs_[i].sel = &selection[i];
            runs_[i].outcome.node = selection[i].node->name;
            run_of_.emplace(selection[i].node->name, i);
            total_ += static_cast<int>(selection[i].stages.size());
        }
    }

    Status begin();
    void loop(int core_threads, int threads);
    RunReport end();

private:
    // A node's place in the run.
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
        // or the generation another worker found holding it took it at.
        int64_t done_since = 0;
        // This worker's lease came after another worker's in this run: what
        // that one verified is looked up before each stage, lease or not.
        bool after_other = false;
        std::shared_ptr<ParkedAction> parked;  // set while an action waits in the parking lot
        NodeOutcome outcome;
    };

    class StageAttempt;
    friend class StageAttempt;

    // Shared with the stop listener, which may fire from another thread
    // while this run is returning.
    struct Wake {
        std::mutex mu;
        std::condition_variable cv;
        std::vector<std::string> pokes;  // other workers' wake-ups (Leases::on_wake), unread
    };
    struct Completion {
        size_t index;
        Attempt attempt;
    };

    static const Selection& selection_of(const NodeRun& r) { return *r.sel; }
    static const std::string& stage_of(const NodeRun& r) { return r.sel->stages[r.next]; }
    void emit(const EngineEvent& e) const { engine_.emit(e); }
    void say(EngineEvent::Kind kind, const std::string& node, const std::string& stage, const std::string& message,
             const std::string& outcome = "", int done = -1) const {
        emit({kind, node, stage, message, outcome, -1, done < 0 ? done_count_.load() : done, total_});
    }

    // Journal writes.
    bool journaled(const Status& st, const std::string& node, const std::string& what);
    std::optional<std::string> take_journal_failure(const std::string& node);
    void released(const Status& st, const std::string& node, const std::string& what);

    // The dispatcher's parts (under wake_->mu).
    Job job_for(size_t i) const;
    void submit(WorkerPool& pool, size_t i);
    void announce_stop(std::unique_lock<std::mutex>& lock);
    void start_ready(WorkerPool& pool);
    bool finished() const;
    void wait_for_news(std::unique_lock<std::mutex>& lock);
    void wake_held(const std::vector<std::string>& pokes);
    void unpark(const std::string& key);

    // What an attempt's outcome does to its node.
    void record(Completion c);
    void record_parked(Completion& c);
    void record_held(size_t i, const Attempt& a);
    void record_retry(size_t i, const Attempt& a);
    void record_done(size_t i, const Attempt& a);
    void end_node(NodeRun& r, NodeState state, const std::string& detail, const std::string& stage,
                  const std::string& error);
    void back_in_service(NodeRun& r);

    Engine& engine_;
    const config::Fleet& fleet_;
    const StageRegistry& registry_;
    journal::Store* store_;
    StopToken& stop_;
    const RunOptions& options_;
    // Each node's state before this run, by the fleet's own name string.
    std::unordered_map<std::string_view, std::string> previous_;

    std::vector<NodeRun> runs_;
    std::unordered_map<std::string_view, size_t> run_of_;  // node name -> index in runs_
    int total_ = 0;                                        // node-stages selected
    std::atomic<int> done_count_{0};                       // node-stages finished

    std::mt19937_64 rng_;
    Scheduler sched_;
    // Null for a store this process owns (SQLite, under its run lock).
    journal::Leases* const leases_;
    // A spine's read, diff and write, one node at a time in this process
    // and, on a shared store, across workers (stage.h hold_exclusive).
    const ExclusiveLocks exclusive_;
    int64_t run_id_ = 0;

    std::shared_ptr<Wake> wake_;
    std::deque<Completion> completions_;  // under wake_->mu
    ParkingLot lot_;                      // parked actions, under wake_->mu
    bool lot_woken_ = false;              // a stage called wake(key): the dispatcher looks at the lot
    bool stop_announced_ = false;

    // Journal writes are never dropped: a resume trusts what the journal
    // says. One that fails fails its node (journal.write) and stops the run
    // (nothing new starts, in-flight actions finish), which then ends
    // "failed". The node's failure is taken when its attempt completes.
    std::mutex journal_mu_;
    std::atomic<bool> journal_stop_{false};              // raised by a failed write, not yet announced
    std::string journal_error_;                          // the first failure, for the run
    std::map<std::string, std::string> journal_failed_;  // node -> its first failure

    std::deque<size_t> ready_;
    // Nodes held back by a full limit, per limit key, in arrival order. A
    // finish frees one unit of each limit its job held: it wakes one node
    // of that key, not every one (which made a long rollout quadratic).
    std::map<std::string, std::deque<size_t>> blocked_;
    std::vector<std::string> woken_from_;               // the key a ready node was woken for
    std::multimap<Clock::time_point, size_t> waiting_;  // retry backoff
    // Nodes in `waiting_` for another worker rather than for a backoff:
    // true when for a lease another worker holds, false for a fleet-wide
    // slot (or a lease to confirm). A wake-up sends them to ready early.
    std::map<size_t, bool> held_waits_;
    int inflight_ = 0;  // attempts on the pool
    int actions_total_ = 0, stages_run_ = 0, stages_skipped_ = 0, stages_done_elsewhere_ = 0;
};

// One attempt at one node-stage, on a worker thread; or the resume of its
// parked action (NodeRun::parked), which carries on from that action. Only
// this attempt touches the node until it completes.
class Engine::Run::StageAttempt {
public:
    StageAttempt(Run& run, size_t i)
        : run_(run),
          r_(run.runs_[i]),
          resume_(std::move(r_.parked)),
          node_(*selection_of(r_).node),
          stage_name_(selection_of(r_).stages[r_.next]),
          hash_(selection_of(r_).hashes[r_.next].hex()),
          stage_(run.registry_.find(stage_name_)),
          timeout_(run.fleet_.limits.timeout_for(stage_name_)),
          started_(resume_ ? resume_->started : journal::now_ms()),
          done_before_(run.done_count_.load()),
          ctx_(
              run.fleet_, node_, stage_name_, run.stop_, r_.deadline.value_or(Clock::now() + timeout_),
              [this](const std::string& msg, int pct) {
                  run_.emit({EngineEvent::Kind::Progress, node_.name, stage_name_, msg, "", pct,
                             run_.done_count_.load(), run_.total_});
              },
              [this](const std::string& kind, const std::string& msg) {
                  run_.journaled(
                      run_.store_->record_event({run_.run_id_, journal::now_ms(), node_.name, stage_name_, kind, msg}),
                      node_.name, "a " + kind + " event");
              }),
          slots_{run, node_.name, resume_ && resume_->slots_held} {
        ctx_.set_reimage(run.options_.reimage);
        wire_records(ctx_, run.store_, run.run_id_);
        ctx_.set_node_pending([&run](const std::string& other) {
            auto at = run.run_of_.find(other);
            if (at == run.run_of_.end()) return false;
            std::lock_guard<std::mutex> l(run.wake_->mu);
            return !run.runs_[at->second].done;
        });
        ctx_.set_hold_exclusive(
            [&run](const StageContext& c, const std::string& key) { return run.exclusive_.acquire(c, key); });
        ctx_.set_can_park(true);
        ctx_.set_wake([&run](const std::string& key) {
            std::lock_guard<std::mutex> l(run.wake_->mu);
            if (run.lot_.wake(key) > 0) {
                run.lot_woken_ = true;
                run.wake_->cv.notify_all();
            }
        });
        a_.actions = resume_ ? resume_->actions_done : 0;
    }

    Attempt go() {
        std::vector<Action> planned;
        size_t first = 0;
        if (resume_) {
            if (auto ended = resumed_end()) return *ended;
            planned = std::move(resume_->actions);
            first = resume_->index;
        } else {
            if (auto ended = claim()) return *ended;
            if (auto ended = observe_and_plan(&planned)) return *ended;
        }
        if (auto ended = apply(&planned, first)) return *ended;
        auto verified = stage_->verify(ctx_);
        if (!verified) return fail(verified.error());
        a_.kind = Attempt::Kind::Verified;
        return finish();
    }

private:
    // Fleet-wide limits, across workers: a slot of each for this stage,
    // given back however the attempt ends, unless an action parks.
    struct SlotRelease {
        Run& run;
        const std::string& node;
        bool held = false;
        ~SlotRelease() {
            if (held) run.released(run.leases_->release_slots(node), node, "the fleet-wide limit slots");
        }
    };

    // The attempt's error, as the run treats it.
    Attempt classify(const Error& err) {
        const auto& limits = run_.fleet_.limits;
        if (err.code == "lease.lost") {
            a_.kind = Attempt::Kind::LeaseLost;
            a_.error = err.message;
        } else if (run_.stop_.hard()) {
            a_.kind = Attempt::Kind::Interrupted;
            a_.error = "stopped during the stage: " + err.message;
        } else if (ctx_.deadline_passed()) {
            a_.kind = Attempt::Kind::TimedOut;
            a_.error = fmt::format("timed out after {} ({})", format_duration(timeout_), err.message);
        } else if (err.quarantine) {
            a_.kind = Attempt::Kind::Quarantined;
            a_.error = err.message;
        } else if (err.transient && r_.attempt <= limits.retries &&
                   Clock::now() + limits.backoff_initial >= ctx_.deadline()) {
            // Retries share the stage's deadline: none fits before it.
            a_.kind = Attempt::Kind::TimedOut;
            a_.error = fmt::format("timed out after {} (attempt {}: {}; no time left for another)",
                                   format_duration(timeout_), r_.attempt, err.message);
        } else if (err.transient && r_.attempt <= limits.retries) {
            a_.kind = Attempt::Kind::Retry;
            a_.error = err.message;
        } else {
            a_.kind = Attempt::Kind::Failed;
            a_.error =
                err.transient ? fmt::format("{} (gave up after {} attempts)", err.message, r_.attempt) : err.message;
        }
        return a_;
    }

    // The stage's row in the journal, for the outcomes that end an attempt.
    Attempt finish() {
        if (a_.kind == Attempt::Kind::Retry || a_.kind == Attempt::Kind::LeaseLost || a_.verified_elsewhere) return a_;
        journal::StageRecord rec{run_.run_id_, node_.name, stage_name_, hash_,    outcome_name(a_.kind),
                                 a_.error,     r_.attempt, a_.actions,  started_, journal::now_ms()};
        if (auto s = run_.store_->record_stage(rec); !s) {
            // A journal that went away under the write (transient) is
            // retried like a stage error: the next attempt observes the
            // node again and records its result then.
            const Attempt::Kind was = a_.kind;
            classify(s.error());
            if (a_.kind == Attempt::Kind::Failed && !s.error().transient) a_.error = s.error().str();
            if (a_.kind == Attempt::Kind::Retry)
                a_.error = "recording " + std::string(outcome_name(was)) + ": " + s.error().message;
        }
        return a_;
    }

    Attempt fail(const Error& err) {
        classify(err);
        return finish();
    }

    Attempt ended(Attempt::Kind kind, std::string error) {
        a_.kind = kind;
        a_.error = std::move(error);
        return finish();
    }

    // A parked action comes back: its wait ended, or the deadline or a stop
    // came first (then apply is not called again; the next run observes
    // what the wait was for). Null: apply it again.
    std::optional<Attempt> resumed_end() {
        ctx_.set_hashes(hash_, resume_->last_verified);
        const Action& action = resume_->actions[resume_->index];
        const std::string& why = resume_->request.reason;
        auto end_action = [&](const std::string& status, const std::string& message) {
            run_.journaled(run_.store_->end_action(resume_->row, status, message), node_.name,
                           "the end of action " + action.id);
        };
        if (run_.stop_.soft()) {
            end_action("interrupted", "stopped while waiting: " + why);
            return ended(Attempt::Kind::Interrupted,
                         fmt::format("stopped while waiting in action {} ({}; {} of {} done)", action.id, why,
                                     resume_->index, resume_->actions.size()));
        }
        if (ctx_.deadline_passed()) {
            auto msg =
                fmt::format("timed out after {} (waiting in action {}: {})", format_duration(timeout_), action.id, why);
            end_action("failed", msg);
            return ended(Attempt::Kind::TimedOut, msg);
        }
        if (run_.leases_) {
            if (auto fresh = run_.leases_->check_fresh(node_.name); !fresh) {
                end_action("interrupted", fresh.error().message);
                a_.kind = Attempt::Kind::Held;
                a_.error = fresh.error().message;
                return a_;
            }
        }
        return std::nullopt;
    }

    // What another worker verified during this run (under a lease claimed
    // since it began, or the one this worker found the node held by), with
    // these very inputs, is done for the fleet's workers together. Without
    // this every worker re-observed every node the others had finished
    // (bench/scale: one stage attempt per worker per node-stage). Null: not
    // verified elsewhere.
    std::optional<Attempt> done_elsewhere() {
        auto done = run_.leases_->verified_since(node_.name, stage_name_, hash_, r_.done_since);
        if (!done) return classify(done.error());
        if (!*done) return std::nullopt;
        a_.kind = Attempt::Kind::Skipped;
        a_.verified_elsewhere = true;
        return finish();
    }

    // Shared stores: the node's lease, max_unavailable across workers (the
    // node's slot, kept over its stages until it is back in service) and
    // the stage's fleet-wide slots, in one transaction (Leases::claim_stage).
    // Null: claimed (or no leases), go on.
    std::optional<Attempt> claim() {
        journal::Leases* leases = run_.leases_;
        if (leases && r_.done_since > 0 && (!r_.leased || r_.after_other))
            if (auto skipped = done_elsewhere()) return skipped;
        if (!leases) return std::nullopt;
        const auto& limits = run_.fleet_.limits;
        const Job job{node_.name, node_.rack, stage_->resources(run_.fleet_, node_)};
        auto claimed = leases->claim_stage(node_.name, stage_name_, run_.options_.lease_ttl, limits.max_unavailable,
                                           run_.sched_.limits_of(job));
        if (!claimed) return classify(claimed.error());
        if (const auto* holder = std::get_if<journal::LeaseHolder>(&claimed->lease)) {
            a_.kind = Attempt::Kind::Held;
            a_.error = "held by worker " + holder->worker;
            a_.held_by_other = true;
            a_.holder_generation = holder->held_from;
            return a_;
        }
        a_.claimed = true;
        if (claimed->unavailable_full) {
            a_.kind = Attempt::Kind::Held;
            a_.error = "fleet-wide limit unavailable is full";
            a_.awaits_unavailable = true;
            return a_;
        }
        if (limits.max_unavailable > 0) a_.out_of_service = true;
        if (claimed->full) {
            a_.kind = Attempt::Kind::Held;
            a_.error = "fleet-wide limit " + *claimed->full + " is full";
            return a_;
        }
        slots_.held = true;
        // The look above came before this claim: a worker that held the
        // node until now may have verified this stage meanwhile. (Under a
        // lease this worker already held, nobody could.)
        if (!r_.leased && r_.done_since > 0 && std::get<journal::Lease>(claimed->lease).generation > r_.done_since) {
            a_.claimed_after_other = true;
            if (auto skipped = done_elsewhere()) return skipped;
        }
        return std::nullopt;
    }

    // Observe and plan; a converged stage ends here (skipped). Null: the
    // plan is in `planned`, the journal knows the node is running.
    std::optional<Attempt> observe_and_plan(std::vector<Action>* planned) {
        auto last = run_.store_->last_verified_hash(node_.name, stage_name_);
        if (!last) return classify(last.error());
        ctx_.set_hashes(hash_, *last);
        run_.say(EngineEvent::Kind::StageStart, node_.name, stage_name_, "", "", done_before_);

        auto observed = stage_->observe(ctx_);
        if (!observed) return fail(observed.error());
        for (const auto& note : observed->notes) {
            ctx_.event("warning", note);
            run_.say(EngineEvent::Kind::Warning, node_.name, stage_name_, note, "", done_before_);
        }
        auto plan = stage_->plan(ctx_, *observed);
        if (!plan) return fail(plan.error());
        if (plan->empty() && *last && **last == hash_ && !run_.options_.reimage) {
            a_.kind = Attempt::Kind::Skipped;
            return finish();
        }
        // The journal hears "running" once there is work: a converged stage
        // costs one read and its result row, nothing more.
        if (!run_.journaled(run_.store_->set_node_state({node_.name, "running", r_.attempt > 1 ? "retrying" : "",
                                                         stage_name_, "", journal::now_ms(), run_.run_id_}),
                            node_.name, "the state running")) {
            a_.kind = Attempt::Kind::Failed;  // nothing applied: the journal would not know of it
            a_.error = *run_.take_journal_failure(node_.name);
            return a_;
        }
        *planned = std::move(*plan);
        return std::nullopt;
    }

    // The plan's actions from `first` on, each journaled. Null: all applied.
    std::optional<Attempt> apply(std::vector<Action>* planned, size_t first) {
        for (size_t k = first; k < planned->size(); ++k) {
            const auto& action = (*planned)[k];
            const bool resumed = resume_ && k == first;
            int64_t row = 0;
            if (resumed) {
                // Its start is journaled already; its end comes below.
                row = resume_->row;
                ctx_.set_resumed(resume_->request.state);
            } else {
                if (run_.stop_.soft())
                    return ended(Attempt::Kind::Interrupted, fmt::format("stopped before action {} ({} of {} done)",
                                                                         action.id, k, planned->size()));
                auto begun =
                    run_.store_->begin_action(run_.run_id_, node_.name, stage_name_, action.id, action.description);
                if (!begun) return fail(begun.error());
                row = *begun;
                if (run_.leases_) {
                    if (auto fresh = run_.leases_->check_fresh(node_.name); !fresh) {
                        // Not confirmed lately (this process stalled?): claim
                        // again, then observe, rather than act on a lease that
                        // may be someone else's by now.
                        run_.journaled(run_.store_->end_action(row, "interrupted", fresh.error().message), node_.name,
                                       "the end of action " + action.id);
                        a_.kind = Attempt::Kind::Held;
                        a_.error = fresh.error().message;
                        return a_;
                    }
                }
                run_.say(EngineEvent::Kind::Action, node_.name, stage_name_, action.description, "", done_before_);
            }
            auto applied = stage_->apply(ctx_, action);
            ctx_.set_resumed(std::nullopt);
            if (auto request = ctx_.take_park(); request && !applied) return park(std::move(*request), planned, k, row);
            run_.journaled(run_.store_->end_action(row, applied ? "ok" : (run_.stop_.hard() ? "interrupted" : "failed"),
                                                   applied ? "" : applied.error().message),
                           node_.name, "the end of action " + action.id);
            if (!applied) return fail(applied.error());
            ++a_.actions;
        }
        return std::nullopt;
    }

    // The action waits outside kiln: its thread goes back to the pool, its
    // slots and lease stay held.
    Attempt park(StageContext::ParkRequest request, std::vector<Action>* planned, size_t k, int64_t row) {
        const bool again = resume_ && k == resume_->index;
        auto p = std::make_shared<ParkedAction>();
        p->request = std::move(request);
        p->actions = std::move(*planned);
        p->index = k;
        p->row = row;
        p->last_verified = ctx_.last_verified_hash();
        p->started = started_;
        p->actions_done = a_.actions;
        p->slots_held = std::exchange(slots_.held, false);
        p->parks = again ? resume_->parks + 1 : 1;
        if (again) p->shown = resume_->shown;
        a_.kind = Attempt::Kind::Parked;
        a_.parked = std::move(p);
        return a_;
    }

    Run& run_;
    NodeRun& r_;
    const std::shared_ptr<ParkedAction> resume_;
    const config::Node& node_;
    const std::string& stage_name_;
    const std::string hash_;
    Stage* stage_;
    const std::chrono::milliseconds timeout_;
    const int64_t started_;
    const int done_before_;
    StageContext ctx_;
    Attempt a_;
    SlotRelease slots_;
};

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
    Run run(*this, options, selection, std::move(previous));
    if (auto s = run.begin(); !s) return s.error();
    run.loop(core_threads, open_files->threads);
    return run.end();
}

Status Engine::Run::begin() {
    if (leases_) {
        // What other workers verify from now on counts as done here, and
        // so does what a live holder verified since it took the node (its
        // earlier stages too: it is mid-run on these inputs; not this worker's own, left by a
        // process of the same name that died). Unread (the store away),
        // every node is observed as without workers.
        if (auto rows = leases_->lease_rows()) {
            std::unordered_map<std::string_view, int64_t> since;
            for (const auto& row : *rows) {
                const bool other_live = !row.worker.empty() && row.worker != leases_->worker_id();
                since.emplace(row.node, other_live ? row.held_from : row.generation + 1);
            }
            for (auto& r : runs_) {
                auto g = since.find(r.outcome.node);
                r.done_since = g == since.end() ? 1 : g->second;
            }
        }
    }
    // Journaled once the leases are read: a run on record has its starting
    // point for the above (tests gate on it).
    auto run_id = store_->begin_run({options_.command, fleet_.path, fleet_.sha256, KILN_VERSION});
    if (!run_id) return run_id.error();
    run_id_ = *run_id;
    woken_from_.resize(runs_.size());
    for (size_t i = 0; i < runs_.size(); ++i) ready_.push_back(i);
    stop_.add_listener([wake = wake_] {
        std::lock_guard<std::mutex> lock(wake->mu);
        wake->cv.notify_all();
    });
    say(EngineEvent::Kind::RunStart, "", "", fleet_.name, "", 0);
    return ok_status();
}

bool Engine::Run::journaled(const Status& st, const std::string& node, const std::string& what) {
    if (st) return true;
    const std::string msg = fmt::format("journal.write: the journal did not record {}{}: {}", what,
                                        node.empty() ? "" : " of " + node, st.error().message);
    bool first = false;
    {
        std::lock_guard<std::mutex> l(journal_mu_);
        first = journal_error_.empty();
        if (first) journal_error_ = msg;
        if (!node.empty()) journal_failed_.emplace(node, msg);
    }
    if (first) {
        say(EngineEvent::Kind::Warning, node, "", msg + "; stopping the run");
        // Raised here, announced by the dispatcher: this may run under
        // wake_->mu, which the stop's listeners take.
        auto& level = stop_.level();
        int was = level.load();
        while (was < 1 && !level.compare_exchange_weak(was, 1)) {
        }
        journal_stop_.store(true);
        wake_->cv.notify_all();
    }
    return false;
}

std::optional<std::string> Engine::Run::take_journal_failure(const std::string& node) {
    std::lock_guard<std::mutex> l(journal_mu_);
    auto it = journal_failed_.find(node);
    if (it == journal_failed_.end()) return std::nullopt;
    std::string msg = std::move(it->second);
    journal_failed_.erase(it);
    return msg;
}

// A lease given back late is not lost: it expires after lease_ttl. Said,
// not fatal.
void Engine::Run::released(const Status& st, const std::string& node, const std::string& what) {
    if (!st)
        say(EngineEvent::Kind::Warning, node, "",
            fmt::format("{} not given back ({}): it expires after the lease ttl", what, st.error().message));
}

Job Engine::Run::job_for(size_t i) const {
    const auto& r = runs_[i];
    const Stage* stage = registry_.find(stage_of(r));
    return Job{selection_of(r).node->name, selection_of(r).node->rack, stage->resources(fleet_, *selection_of(r).node)};
}

void Engine::Run::submit(WorkerPool& pool, size_t i) {
    ++inflight_;
    pool.submit([this, i] {
        Attempt a = StageAttempt(*this, i).go();
        std::lock_guard<std::mutex> l(wake_->mu);
        completions_.push_back({i, std::move(a)});
        wake_->cv.notify_all();
    });
}

void Engine::Run::loop(int core_threads, int threads) {
    // Keeps this worker's leases alive while the pool works, and wakes it
    // when another worker frees what it waits for.
    std::optional<journal::LeaseHeartbeat> heartbeat;
    if (leases_) {
        heartbeat.emplace(*leases_, options_.lease_ttl);
        leases_->on_wake([wake = wake_](const std::string& what) {
            std::lock_guard<std::mutex> lock(wake->mu);
            if (std::find(wake->pokes.begin(), wake->pokes.end(), what) == wake->pokes.end())
                wake->pokes.push_back(what);  // coalesced until the loop reads them
            wake->cv.notify_all();
        });
    }
    {
        // Threads for the cores; `parallel` bounds nodes in flight, parked
        // ones included (they keep their scheduler slots).
        WorkerPool pool(core_threads, threads);
        std::unique_lock<std::mutex> lock(wake_->mu);
        for (;;) {
            announce_stop(lock);
            const auto now = Clock::now();
            while (!waiting_.empty() && waiting_.begin()->first <= now) {
                ready_.push_back(waiting_.begin()->second);
                held_waits_.erase(waiting_.begin()->second);
                waiting_.erase(waiting_.begin());
            }
            if (!wake_->pokes.empty()) {
                wake_held(wake_->pokes);
                wake_->pokes.clear();
            }
            // Parked actions whose wait is over (time, event, deadline or
            // stop) resume on the pool; they hold their slots already.
            lot_woken_ = false;
            for (size_t i : lot_.take_due(now)) submit(pool, i);
            start_ready(pool);
            if (finished()) break;
            if (completions_.empty()) wait_for_news(lock);
            while (!completions_.empty()) {
                Completion c = std::move(completions_.front());
                completions_.pop_front();
                --inflight_;
                record(std::move(c));
            }
        }
        lock.unlock();
        // pool joins here: every task has completed (inflight_ == 0).
    }
    stop_.clear_listeners();
    if (leases_) leases_->on_wake(nullptr);
    heartbeat.reset();
}

// A failed journal write stops the run; a person's stop ends parked waits
// (they are not actions in progress: they end now, as interrupted).
void Engine::Run::announce_stop(std::unique_lock<std::mutex>& lock) {
    if (journal_stop_.exchange(false)) {
        // Wakes waits on the stop (StopToken::wait_for) and this loop's
        // listener, outside the lock.
        lock.unlock();
        stop_.notify();
        lock.lock();
    }
    if (!stop_.soft() || stop_announced_) return;
    stop_announced_ = true;
    lot_.wake_all();
    journaled(store_->record_event({run_id_, journal::now_ms(), "", "", "stop",
                                    "stop requested: no new work; in-flight actions finish"}),
              "", "the stop");
    say(EngineEvent::Kind::Stop, "", "", "stopping: in-flight actions finish, nothing new starts");
}

// Starts ready nodes' stages while the limits let them.
void Engine::Run::start_ready(WorkerPool& pool) {
    while (!stop_.soft() && !ready_.empty()) {
        size_t i = ready_.front();
        Job job = job_for(i);
        std::string b = sched_.blocker(job);
        if (b == "parallel") break;
        ready_.pop_front();
        const std::string from = std::exchange(woken_from_[i], std::string());
        if (!b.empty()) {
            // Back to the front when the unit it was woken for went to
            // another; else queue on the new limit and wake the next node
            // for the unit still free.
            if (b == from) {
                blocked_[b].push_front(i);
            } else {
                blocked_[b].push_back(i);
                if (!from.empty()) unpark(from);
            }
            continue;
        }
        sched_.start(job);
        if (!runs_[i].deadline) runs_[i].deadline = Clock::now() + fleet_.limits.timeout_for(stage_of(runs_[i]));
        submit(pool, i);
    }
}

bool Engine::Run::finished() const {
    return inflight_ == 0 && completions_.empty() && lot_.empty() &&
           (stop_.soft() || (ready_.empty() && waiting_.empty()));
}

// Until an attempt completes, a parked action is due or woken, another
// worker pokes, a retry's backoff ends, or a stop comes.
void Engine::Run::wait_for_news(std::unique_lock<std::mutex>& lock) {
    std::optional<Clock::time_point> until;
    if (!waiting_.empty() && !stop_.soft()) until = waiting_.begin()->first;
    if (auto due = lot_.next_due()) until = until ? std::min(*until, *due) : *due;
    auto woken = [&] {
        return !completions_.empty() || lot_woken_ || !wake_->pokes.empty() || (stop_.soft() && !stop_announced_);
    };
    if (until)
        wake_->cv.wait_until(lock, *until, woken);
    else
        wake_->cv.wait(lock, woken);
}

void Engine::Run::wake_held(const std::vector<std::string>& pokes) {
    std::set<std::string> released;
    bool slots = false;
    bool all = false;  // the listener (re)started: what it missed may be anything
    for (const auto& p : pokes) {
        if (p.rfind("node:", 0) == 0)
            released.insert(p.substr(5));
        else if (p == "all")
            all = slots = true;
        else
            slots = true;  // "slots", "run": anything may fit now
    }
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        auto h = held_waits_.find(it->second);
        if (h != held_waits_.end() &&
            (h->second ? all || released.count(runs_[it->second].outcome.node) != 0 : slots)) {
            ready_.push_back(it->second);
            held_waits_.erase(h);
            it = waiting_.erase(it);
        } else {
            ++it;
        }
    }
}

void Engine::Run::unpark(const std::string& key) {
    auto it = blocked_.find(key);
    if (it == blocked_.end()) return;
    const size_t i = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) blocked_.erase(it);
    ready_.push_front(i);
    woken_from_[i] = key;
}

void Engine::Run::record(Completion c) {
    NodeRun& r = runs_[c.index];
    if (c.attempt.claimed) r.leased = true;
    if (c.attempt.claimed_after_other) r.after_other = true;
    if (c.attempt.out_of_service) r.out_of_service = true;
    if (c.attempt.kind == Attempt::Kind::Parked) return record_parked(c);

    Job job = job_for(c.index);
    sched_.finish(job);
    unpark("rack:" + job.rack);
    for (const auto& res : job.resources) unpark(res);
    const std::string stage_name = stage_of(r);
    r.actions += c.attempt.actions;
    actions_total_ += c.attempt.actions;
    Attempt& a = c.attempt;
    if (a.kind != Attempt::Kind::LeaseLost) {
        // A journal write of this attempt failed: the node fails with it,
        // whatever the stage said.
        if (auto jf = take_journal_failure(r.outcome.node)) {
            const bool failed_already = a.kind == Attempt::Kind::Failed || a.kind == Attempt::Kind::TimedOut ||
                                        a.kind == Attempt::Kind::Quarantined;
            a.error = failed_already ? a.error + "; " + *jf : *jf;
            if (!failed_already) a.kind = Attempt::Kind::Failed;
        }
    }
    switch (a.kind) {
        case Attempt::Kind::Parked:  // record_parked
            break;
        case Attempt::Kind::Held:
            record_held(c.index, a);
            break;
        case Attempt::Kind::LeaseLost:
            // Fenced: the journal is the new holder's now.
            ++done_count_;
            leases_->forget(r.outcome.node);
            r.leased = false;
            say(EngineEvent::Kind::StageEnd, r.outcome.node, stage_name, a.error, "lease_lost");
            end_node(r, NodeState::Pending, "lease lost", stage_name, a.error);
            back_in_service(r);
            break;
        case Attempt::Kind::Retry:
            record_retry(c.index, a);
            break;
        case Attempt::Kind::Verified:
        case Attempt::Kind::Skipped:
            record_done(c.index, a);
            break;
        case Attempt::Kind::Interrupted:
            ++done_count_;
            say(EngineEvent::Kind::StageEnd, r.outcome.node, stage_name, a.error, "interrupted");
            end_node(r, NodeState::Pending, "interrupted", stage_name, a.error);
            back_in_service(r);
            break;
        case Attempt::Kind::Quarantined:
        case Attempt::Kind::Failed:
        case Attempt::Kind::TimedOut: {
            ++done_count_;
            const bool q = a.kind == Attempt::Kind::Quarantined;
            say(EngineEvent::Kind::StageEnd, r.outcome.node, stage_name, a.error, outcome_name(a.kind));
            // A failed node stays out of service: it keeps its
            // max_unavailable slot so a rollout halts.
            end_node(r, q ? NodeState::Quarantined : NodeState::Failed, outcome_name(a.kind), stage_name,
                     stage_name + ": " + a.error);
            break;
        }
    }
}

// Still in flight: its slots stay taken, its actions are counted when the
// stage ends. A stop resumes it at once (to end it); otherwise the earlier
// of its wake-up time and the stage deadline.
void Engine::Run::record_parked(Completion& c) {
    NodeRun& r = runs_[c.index];
    const auto& req = c.attempt.parked->request;
    const auto at = stop_.soft() ? Clock::now() : std::min(req.until, *r.deadline);
    lot_.park(c.index, at, req.key);
    // Said once per thing waited for, not once per poll (a flash waits for
    // its task, then the BMC's restart, then the job the host's reset
    // runs): a stage that polls says more itself.
    if (std::string subject = park_subject(req.reason); subject != c.attempt.parked->shown) {
        say(EngineEvent::Kind::Progress, r.outcome.node, stage_of(r), "waiting: " + req.reason);
        c.attempt.parked->shown = std::move(subject);
    }
    r.parked = std::move(c.attempt.parked);
}

// Another worker has the node (its lease ends when it finishes the node or
// dies), a fleet-wide limit is full, or our lease needs confirming: ask
// again later.
void Engine::Run::record_held(size_t i, const Attempt& a) {
    NodeRun& r = runs_[i];
    // A first attempt that never ran has not started the stage's clock.
    if (r.attempt == 1) r.deadline.reset();
    // Another worker holds the node: not out of service by this worker's
    // hand, so not counted here. (One waiting for the fleet-wide unit stays
    // counted, so this worker does not claim more nodes meanwhile.)
    if (!r.out_of_service && !a.awaits_unavailable) {
        sched_.release(r.outcome.node);
        unpark("unavailable");
    }
    waiting_.emplace(Clock::now() + options_.lease_poll, i);
    held_waits_[i] = a.held_by_other;
    if (a.held_by_other && a.holder_generation > 0) r.done_since = std::min(r.done_since, a.holder_generation);
}

void Engine::Run::record_retry(size_t i, const Attempt& a) {
    NodeRun& r = runs_[i];
    const std::string& stage_name = stage_of(r);
    auto delay = backoff_delay(r.attempt, fleet_.limits.backoff_initial, fleet_.limits.backoff_max, rng_);
    auto msg = fmt::format("attempt {} failed: {}; retrying in {}", r.attempt, a.error, format_duration(delay));
    ++r.attempt;
    journaled(store_->record_event({run_id_, journal::now_ms(), r.outcome.node, stage_name, "retry", msg}),
              r.outcome.node, "a retry event");
    journaled(
        store_->set_node_state({r.outcome.node, "running", "waiting", stage_name, a.error, journal::now_ms(), run_id_}),
        r.outcome.node, "the state running");
    say(EngineEvent::Kind::Retry, r.outcome.node, stage_name, msg);
    waiting_.emplace(Clock::now() + delay, i);
}

// Verified or skipped: the node's next stage, or its end.
void Engine::Run::record_done(size_t i, const Attempt& a) {
    NodeRun& r = runs_[i];
    const std::string stage_name = stage_of(r);
    const bool skipped = a.kind == Attempt::Kind::Skipped;
    ++(a.verified_elsewhere ? stages_done_elsewhere_ : skipped ? stages_skipped_ : stages_run_);
    r.all_skipped = r.all_skipped && skipped;
    if (registry_.find(stage_name)->hands_over()) r.handed_over = true;
    int d = ++done_count_;
    say(EngineEvent::Kind::StageEnd, r.outcome.node, stage_name,
        a.verified_elsewhere ? std::string("verified by another worker")
                             : fmt::format("{} action{}", a.actions, a.actions == 1 ? "" : "s"),
        outcome_name(a.kind), d);
    r.attempt = 1;
    r.deadline.reset();
    if (++r.next < selection_of(r).stages.size()) {
        ready_.push_front(i);  // depth first: finish nodes, free their slots
        return;
    }
    auto prev = previous_.find(r.outcome.node);
    bool was_ready = prev != previous_.end() && prev->second == "ready";
    if (r.handed_over || (r.all_skipped && was_ready))
        end_node(r, NodeState::Ready, r.all_skipped ? "converged" : "handed over", stage_name, "");
    else
        end_node(r, NodeState::Pending, "verified", stage_name, "");
    back_in_service(r);
    unpark("unavailable");
}

void Engine::Run::end_node(NodeRun& r, NodeState state, const std::string& detail, const std::string& stage,
                           const std::string& error) {
    r.done = true;
    r.outcome.state = state;
    r.outcome.detail = detail;
    r.outcome.stage = stage;
    r.outcome.error = error;
    r.outcome.actions = r.actions;
    // Under leases, only the holder writes a node's state, then gives the
    // node back; a node never claimed here is another worker's.
    if (!leases_ || r.leased) {
        if (!journaled(store_->set_node_state(
                           {r.outcome.node, to_string(state), detail, stage, error, journal::now_ms(), run_id_}),
                       r.outcome.node, std::string("the state ") + to_string(state))) {
            // The journal keeps an older state: the report says so.
            r.outcome.state = NodeState::Failed;
            const std::string msg = *take_journal_failure(r.outcome.node);
            r.outcome.error = error.empty() ? msg : error + "; " + msg;
        }
    }
    if (leases_ && r.leased) {
        released(leases_->release(r.outcome.node), r.outcome.node, "the node's lease");
        r.leased = false;
    }
    say(EngineEvent::Kind::NodeEnd, r.outcome.node, stage, error, to_string(state));
}

// The node is back in service (or no longer this worker's): its
// max_unavailable unit, here and fleet-wide, is free again.
void Engine::Run::back_in_service(NodeRun& r) {
    sched_.release(r.outcome.node);
    if (leases_ && r.out_of_service)
        released(leases_->release_unavailable(r.outcome.node), r.outcome.node, "the fleet-wide max_unavailable slot");
    r.out_of_service = false;
}

RunReport Engine::Run::end() {
    // Nodes a retry was waiting on when a stop came: record where they are.
    for (auto& [when, i] : waiting_) {
        auto& r = runs_[i];
        end_node(r, NodeState::Pending, "interrupted", stage_of(r), "stopped while waiting to retry");
    }
    // Nodes stopped between two stages: give their leases back now rather
    // than let them expire. Failed nodes kept their max_unavailable slots
    // for the run, as one process keeps them; the run ends here.
    for (auto& r : runs_) {
        if (leases_ && r.leased && !r.done) {
            released(leases_->release(r.outcome.node), r.outcome.node, "the node's lease");
            r.leased = false;
        }
        if (leases_ && r.out_of_service) back_in_service(r);
    }

    RunReport report;
    report.run_id = run_id_;
    report.actions = actions_total_;
    report.stages_run = stages_run_;
    report.stages_skipped = stages_skipped_;
    report.stages_done_elsewhere = stages_done_elsewhere_;
    bool any_failed = false;
    for (auto& r : runs_) {
        if (!r.done) {
            // Never started (stop) or parked behind max_unavailable: the
            // journal keeps its previous state.
            auto prev = previous_.find(r.outcome.node);
            r.outcome.state = prev != previous_.end() ? parse_node_state(prev->second).value_or(NodeState::Pending)
                                                      : NodeState::Pending;
            r.outcome.detail = stop_.soft() ? "not started" : "blocked: max_unavailable reached";
            r.outcome.stage = stage_of(r);
            if (!stop_.soft()) any_failed = true;
        }
        if (r.outcome.state == NodeState::Failed || r.outcome.state == NodeState::Quarantined) any_failed = true;
        report.nodes.push_back(r.outcome);
    }
    report.status = stop_.soft() ? RunStatus::Interrupted : (any_failed ? RunStatus::Failed : RunStatus::Completed);
    {
        std::lock_guard<std::mutex> l(journal_mu_);
        if (!journal_error_.empty()) report.status = RunStatus::Failed;  // stopped by the journal, not by a person
    }
    journaled(store_->end_run(run_id_, to_string(report.status)), "", "the run's end");
    say(EngineEvent::Kind::RunEnd, "", "", to_string(report.status), to_string(report.status));
    return report;
}

}  // namespace kiln::engine
