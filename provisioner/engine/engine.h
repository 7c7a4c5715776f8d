// The engine: runs each selected node through its pipeline's stages under
// the scheduler's limits, journaling every result, action and state change.
//
// Per node-stage: hash inputs -> observe -> plan. An empty plan whose hash
// equals the last verified run is skipped; otherwise each action is applied
// (journaled start and end), then verify. Transient errors retry the stage
// with jittered backoff; other errors fail that node only. A soft stop lets
// in-flight actions finish and records where each node stopped.
//
// An action may park (StageContext::park): its node stays in flight,
// holding its slots, while no thread runs it; a ParkingLot resumes it on
// the pool at its wake-up time, an event, the stage deadline (timed out)
// or a stop (interrupted). `limits.parallel` bounds nodes in flight; the
// pool is sized to the cores (worker_pool.h). docs/engine.md "Parked waits".
//
// With a store shared by several workers (PostgreSQL), each node-stage is
// first claimed as a lease (journal/leases.h): a node another worker holds
// waits, and a lease lost to a takeover ends the node here ("lease.lost")
// before its next side effect.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/engine/cancel.h"
#include "provisioner/engine/input_hash.h"
#include "provisioner/engine/outcome.h"
#include "provisioner/engine/stage.h"
#include "provisioner/engine/stage_registry.h"
#include "provisioner/journal/store.h"

namespace kiln::engine {

struct RunOptions {
    std::string command = "apply";    // journaled with the run
    std::vector<std::string> nodes;   // empty = every node
    std::vector<std::string> stages;  // empty = the whole pipeline
    std::string pipeline;             // "" = each node's role; "reimage" for kiln reimage
    bool reimage = false;             // forget verified hashes first; stages redo their work
    uint64_t seed = 0;                // backoff jitter; 0 = random
    // When the store is shared by workers (Store::leases()): a claim lasts
    // lease_ttl past its last heartbeat; a node another worker holds is
    // asked for again every lease_poll.
    std::chrono::milliseconds lease_ttl{30000};
    std::chrono::milliseconds lease_poll{1000};
};

// What the engine tells its printer (live status line, JSON stream, logs).
struct EngineEvent {
    // Warning: an observation's note (Observation::notes), not an error.
    enum class Kind { RunStart, StageStart, Progress, Warning, Action, StageEnd, Retry, NodeEnd, Stop, RunEnd };
    Kind kind = Kind::Progress;
    std::string node;
    std::string stage;
    std::string message;
    std::string outcome;  // StageEnd: verified | skipped | failed | ...; NodeEnd: node state
    int percent = -1;
    int done = 0;   // node-stages finished so far
    int total = 0;  // node-stages selected
};

class EventSink {
public:
    virtual ~EventSink() = default;
    // Called from worker threads and the dispatcher; implementations lock.
    virtual void on_event(const EngineEvent& event) = 0;
};

struct NodeOutcome {
    std::string node;
    NodeState state = NodeState::Pending;
    std::string detail;  // verified | interrupted | blocked | skipped ...
    std::string stage;   // last stage touched
    std::string error;
    int actions = 0;  // actions applied in this run
};

struct RunReport {
    int64_t run_id = 0;
    RunStatus status = RunStatus::Completed;
    std::vector<NodeOutcome> nodes;
    int actions = 0;
    int stages_run = 0;
    int stages_skipped = 0;         // observed converged
    int stages_done_elsewhere = 0;  // verified by another worker during this run, not observed here
};

struct PlanEntry {
    std::string node;
    std::string stage;
    PlanStatus status = PlanStatus::Work;
    std::string input_hash;
    std::string last_verified;  // "" when never verified
    std::vector<Action> actions;
    std::vector<std::string> notes;  // the observation's warnings (Observation::notes)
    std::string error;
    std::string error_code;
};

struct PlanReport {
    std::vector<PlanEntry> entries;
    bool has_work() const;
    bool has_errors() const;
};

// What a streamed plan adds up to.
struct PlanSummary {
    int work = 0;  // node-stages with work
    int converged = 0;
    int errors = 0;
    int actions = 0;
};

// Receives a plan one node at a time, in selection (fleet) order: the
// node's entries, one per selected stage. The engine keeps nothing of a
// node once it is handed over, so a plan of 100,000 nodes holds only the
// nodes in flight.
using PlanSink = std::function<void(std::vector<PlanEntry>& node_entries)>;

class Engine {
public:
    Engine(const config::Fleet& fleet, const StageRegistry& registry, journal::Store* store, EventSink* sink,
           StopToken& stop);

    // Checks the selection before anything runs: unknown nodes or stages,
    // stages not in a node's pipeline, stages not implemented in this build.
    Status check(const RunOptions& options) const;

    // Changes nothing: observe and plan every selected node-stage. `store`
    // may be null (no journal yet: nothing verified).
    Result<PlanSummary> plan(const RunOptions& options, const PlanSink& sink);
    // The same, every entry kept: for small plans and tests.
    Result<PlanReport> plan(const RunOptions& options);

    Result<RunReport> run(const RunOptions& options);

private:
    class Run;  // one run, in named parts (engine_run.cc)
    struct Selection {
        const config::Node* node;
        const config::Pipeline* pipeline;
        std::vector<std::string> stages;  // selected, in pipeline order
        std::vector<StageHash> hashes;    // input hash per selected stage
    };
    Result<std::vector<Selection>> select(const RunOptions& options) const;
    Result<std::vector<StageHash>> pipeline_hashes(const config::Node& node, const config::Pipeline& pipeline,
                                                   const std::vector<std::string>& selected) const;
    Status check_implemented(const std::vector<Selection>& selection) const;
    void emit(const EngineEvent& e) const;

    const config::Fleet& fleet_;
    const StageRegistry& registry_;
    journal::Store* store_;
    EventSink* sink_;
    StopToken& stop_;
};

}  // namespace kiln::engine
