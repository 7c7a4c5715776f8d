// The journal: what kiln did, durable across crashes. Runs, node x stage
// results with input hashes, actions with start/end/outcome, events, and
// each node's current state. SQLite (sqlite_store.h) is the embedded
// implementation; a PostgreSQL store implements the same interface.
// Implementations are thread-safe. Nothing secret is ever written here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::journal {

class Leases;  // leases.h: node leases for stores several workers share
struct LeaseRow;
struct WorkerRow;

// Milliseconds since the Unix epoch (wall clock).
int64_t now_ms();

struct RunInfo {
    std::string command;  // "apply", "reimage", ...
    std::string fleet_path;
    std::string fleet_sha256;
    std::string kiln_version;
};

struct RunSummary {
    int64_t id = 0;
    std::string command;
    std::string status;  // running | completed | failed | interrupted
    int64_t started_ms = 0;
    int64_t ended_ms = 0;  // 0 while running
};

// Outcome strings (stable, documented): verified, skipped, failed,
// interrupted, timed_out, quarantined.
struct StageRecord {
    int64_t run_id = 0;
    std::string node;
    std::string stage;
    std::string input_hash;
    std::string outcome;
    std::string error;  // "" unless failed
    int attempts = 1;
    int actions = 0;  // actions applied in this run
    int64_t started_ms = 0;
    int64_t ended_ms = 0;
};

struct EventRecord {
    int64_t run_id = 0;
    int64_t ts_ms = 0;
    std::string node;  // "" for run-level events
    std::string stage;
    std::string kind;  // "stage.start", "retry", "stop", ...
    std::string message;
};

// Current state, one row per node. `state` is one of: pending, running,
// failed, quarantined, ready. `detail` refines it (waiting, verified, ...).
struct NodeState {
    std::string node;
    std::string state;
    std::string detail;
    std::string stage;  // current or last stage
    std::string error;
    int64_t updated_ms = 0;
    int64_t run_id = 0;
};

struct HistoryEntry {
    int64_t ts_ms = 0;
    int64_t run_id = 0;
    std::string kind;  // "stage", "action", "event"
    std::string stage;
    std::string name;     // outcome for stage rows, action id, event kind
    std::string text;     // hash / description / message
    std::string outcome;  // stage: outcome; action: ok | failed | interrupted | "" (never finished)
    std::string error;
};

// A record a stage publishes for later stages and the report (the smoke
// stage's result, handover's verdict): its kind, the version of its body's
// schema, and the body, JSON written and read by the publishing stage's
// record type. Each is kept; readers take the newest of a kind.
struct NodeRecord {
    int64_t run_id = 0;
    std::string node;
    std::string stage;
    std::string kind;  // "smoke.result", "handover", ...
    int schema = 0;
    std::string body;
    int64_t ts_ms = 0;
};

class Store {
public:
    virtual ~Store() = default;

    virtual Result<int64_t> begin_run(const RunInfo& info) = 0;
    virtual Status end_run(int64_t run_id, const std::string& status) = 0;
    virtual Result<std::vector<RunSummary>> runs(int limit) = 0;

    // Input hash of the last verified (or skipped) run of this node's stage.
    virtual Result<std::optional<std::string>> last_verified_hash(const std::string& node,
                                                                  const std::string& stage) = 0;
    // Records a stage result; verified/skipped also become the node-stage's
    // last verified hash; failed/interrupted leave it as it was.
    virtual Status record_stage(const StageRecord& record) = 0;
    // Forgets a node's last verified hashes (all stages, or one): reimage.
    virtual Status forget_verified(const std::string& node, const std::string& stage) = 0;

    // Returns the action's row id, to pass to end_action.
    virtual Result<int64_t> begin_action(int64_t run_id, const std::string& node, const std::string& stage,
                                         const std::string& action_id, const std::string& description) = 0;
    virtual Status end_action(int64_t action_row, const std::string& outcome, const std::string& error) = 0;

    virtual Status record_event(const EventRecord& event) = 0;

    virtual Status set_node_state(const NodeState& state) = 0;
    virtual Result<std::vector<NodeState>> node_states() = 0;

    // Newest first, at most `limit` entries (0 = all).
    virtual Result<std::vector<HistoryEntry>> history(const std::string& node, int limit) = 0;

    // Every stage result of a node, oldest first, with start and end times:
    // `kiln report`'s timeline. Stores without it say so.
    virtual Result<std::vector<StageRecord>> stage_records(const std::string& node) {
        return Error{"journal", "journal.unsupported", "this journal cannot list stage results of " + node};
    }

    // Published records (NodeRecord). Stores without them say so.
    virtual Status put_record(const NodeRecord& record);
    // The newest record of `kind` for `node`; nullopt when there is none.
    virtual Result<std::optional<NodeRecord>> latest_record(const std::string& node, const std::string& kind);

    // Node leases, when several workers share this store (PostgreSQL);
    // null for a store one process owns under its run lock (SQLite).
    virtual Leases* leases() { return nullptr; }

    // Who holds what, on a store workers share (a reader too): the leases
    // live now (`kiln status`) and the live workers (`kiln workers`).
    // Stores one process owns have neither and say so.
    virtual Result<std::vector<LeaseRow>> live_leases();
    virtual Result<std::vector<WorkerRow>> live_workers();
};

}  // namespace kiln::journal
