// Node leases: how several kiln workers share one fleet in one store. A
// worker claims a node's next stage; the lease lasts until `lease_until`
// (the server's clock) and a heartbeat renews it. Every claim bumps the
// node's generation, and every journal write the holder makes about that
// node checks the generation in the same transaction (fencing): a worker
// whose lease was taken over gets "lease.lost" before its next side effect.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::journal {

struct Lease {
    std::string node;
    std::string stage;
    std::string worker;
    int64_t generation = 0;
};

// Who holds a node when a claim is refused.
struct LeaseHolder {
    std::string worker;
    int64_t generation = 0;
    int64_t lease_until_ms = 0;  // server clock
    // The generation it took the node at: what it verified since (its
    // earlier stages of this hold too) is at this generation or later.
    int64_t held_from = 0;
};

// The rows `kiln workers`-style views and tests read.
struct LeaseRow {
    std::string node;
    std::string stage;
    std::string worker;  // "" when released (lease_rows: or expired)
    int64_t generation = 0;
    int64_t lease_until_ms = 0;
    int64_t held_from = 0;  // the generation its holder took the node at (LeaseHolder)
};

// A live worker, for `kiln workers`: who it is, what it serves, when the
// server last heard from it, and the nodes it holds now.
struct WorkerRow {
    std::string worker;
    std::string host;
    int64_t pid = 0;
    std::string labels;              // "rack=r1,zone=a" as given; "" = every node
    int64_t started_ms = 0;          // server clock
    int64_t heartbeat_ms = 0;        // server clock
    int64_t expires_ms = 0;          // heartbeat + ttl: not live after this
    int64_t heartbeat_age_ms = 0;    // how long ago, by the server's clock
    std::vector<std::string> nodes;  // held now, by node name
};

// What claim_stage found. `lease` is the claim's answer; when it is a
// Lease, `unavailable_full` says the node's max_unavailable slot could not
// be taken (no stage slot was tried), else `full` names a full stage limit
// (none of the stage's slots taken). The lease, and the unavailable slot
// once taken, are kept either way, as claim() and take_unavailable() keep
// them.
struct StageClaim {
    std::variant<Lease, LeaseHolder> lease;
    bool unavailable_full = false;
    std::optional<std::string> full;
};

// What a worker's heartbeat and its journal connection have done, for its
// metrics and for bench/scale.
struct LeaseCounters {
    int64_t renewals = 0;    // leases extended
    int64_t losses = 0;      // leases found taken over (fenced)
    int64_t reconnects = 0;  // connections made again after the server went away
    // On the store's journal connection (not the wake-up listener's):
    // statements sent, one round trip each (BEGIN and its SET LOCAL go as
    // one), and commits (a transaction's, or a write sent on its own) that
    // waited for the server to flush them or did not (docs/store.md).
    int64_t statements = 0;
    int64_t commits_flushed = 0;
    int64_t commits_unflushed = 0;
};

class Leases {
public:
    virtual ~Leases() = default;

    // This process's worker id ("host:pid:nonce" unless given); set before
    // the first claim.
    virtual void set_worker_id(const std::string& worker) = 0;
    virtual const std::string& worker_id() const = 0;

    // Claims `node` for `stage` for `ttl`: free, released, expired or ours
    // already. A node another live worker holds is not waited on (SKIP
    // LOCKED): the holder comes back instead. Taking over from a dead
    // worker ends the actions it left unfinished as "interrupted" (the
    // stage re-observes them; nothing is re-run blindly).
    virtual Result<std::variant<Lease, LeaseHolder>> claim(const std::string& node, const std::string& stage,
                                                           std::chrono::milliseconds ttl) = 0;
    // The gate before a node-stage, in one transaction (one flushed
    // commit): claim(), then take_unavailable() when `unavailable_capacity`
    // is above 0 and the claim succeeded, then take_slots() for `limits`
    // when that succeeded, each as the call of that name does it.
    virtual Result<StageClaim> claim_stage(const std::string& node, const std::string& stage,
                                           std::chrono::milliseconds ttl, int unavailable_capacity,
                                           std::vector<std::pair<std::string, int>> limits) = 0;
    // Extends every lease this worker holds; returns the nodes it no longer
    // holds (taken over while this process was stalled).
    virtual Result<std::vector<std::string>> renew(std::chrono::milliseconds ttl) = 0;
    // Gives the node back (its generation stays: fencing is monotonic).
    virtual Status release(const std::string& node) = 0;
    // Forgets a lease locally after it was lost (no write: it is not ours).
    virtual void forget(const std::string& node) = 0;

    // Right before a side effect: fails with "lease.stale" unless the
    // lease was confirmed by the server (claim or renewal) within half its
    // ttl, by this process's monotonic clock. Fencing in the journal guards
    // every write; this narrows the window between the fenced start of an
    // action and its effect, which no journal write can close.
    virtual Status check_fresh(const std::string& node) = 0;

    // Fleet-wide counting limits: takes one slot of each (key, capacity)
    // for `node`, all or none, in one transaction (SKIP LOCKED: a slot
    // another worker is taking is not waited on). Returns the key of a
    // full limit, or nullopt when every slot was taken. Slots expire with
    // the heartbeat, as leases do, so a dead worker's come back.
    virtual Result<std::optional<std::string>> take_slots(const std::string& node,
                                                          std::vector<std::pair<std::string, int>> limits,
                                                          std::chrono::milliseconds ttl) = 0;
    // Gives back the slots take_slots took for `node` (not its
    // "unavailable" slot, below).
    virtual Status release_slots(const std::string& node) = 0;

    // max_unavailable across workers: one slot of the limit "unavailable"
    // for `node`, held from its first stage until it is back in service
    // (release_unavailable), across stage attempts, renewed by the
    // heartbeat like every slot. Taking it again for a node that holds it
    // keeps the same slot. True when held, false when the limit is full.
    virtual Result<bool> take_unavailable(const std::string& node, int capacity, std::chrono::milliseconds ttl) = 0;
    virtual Status release_unavailable(const std::string& node) = 0;

    // Named exclusive locks across workers ("switch:spine-1"): held for a
    // short critical section on a shared thing that no node's slots cover
    // (a spine's read, diff and write), on behalf of `node`, renewed by the
    // heartbeat like every slot and given back when a dead worker's expire.
    // Not waited on: nullopt when taken, else who holds it ("worker w2 for
    // node n7"), so the caller waits with its own deadline. One holder per
    // name per worker: callers serialise their own threads first
    // (engine/exclusive_locks.h).
    virtual Result<std::optional<std::string>> take_lock(const std::string& key, const std::string& node,
                                                         std::chrono::milliseconds ttl) = 0;
    virtual Status release_lock(const std::string& key) = 0;

    // Whether `node`'s `stage` was verified with `input_hash` by a holder
    // of lease generation `generation` or a later one: a worker that found
    // the node held at that generation counts the stage as done (engine).
    virtual Result<bool> verified_since(const std::string& node, const std::string& stage,
                                        const std::string& input_hash, int64_t generation) = 0;

    // Every node's lease row; `worker` is "" for one released or expired.
    virtual Result<std::vector<LeaseRow>> lease_rows() = 0;

    // Lists this worker as live (`kiln workers`) until ttl after its last
    // heartbeat; renew() keeps it so even while the worker holds nothing.
    // `labels` is what it serves, as given. deregister: a clean exit.
    virtual Status register_worker(const std::string& labels, std::chrono::milliseconds ttl) = 0;
    virtual Status deregister_worker() = 0;
    virtual LeaseCounters counters() = 0;

    // Wake-ups over LISTEN/NOTIFY: `wake` is called, on a listener thread
    // with a connection of its own, when any worker gives a node back
    // ("node:NAME"), frees slots ("slots") or begins a run ("run"), so a
    // worker waiting on them asks again at once instead of at its next
    // poll; and with "all" each time it starts listening (again), for what
    // was given back while it was not. The bounded poll stays as the
    // fallback for a lost notification. Null stops listening.
    virtual void on_wake(std::function<void(const std::string&)> wake) = 0;
};

// Renews a worker's leases every ttl/3 on its own thread until destroyed.
// A stalled process (SIGSTOP, a long GC-like pause) stalls this thread too,
// which is the point: its leases expire and fencing takes over.
class LeaseHeartbeat {
public:
    LeaseHeartbeat(Leases& leases, std::chrono::milliseconds ttl);
    ~LeaseHeartbeat();
    LeaseHeartbeat(const LeaseHeartbeat&) = delete;
    LeaseHeartbeat& operator=(const LeaseHeartbeat&) = delete;

private:
    Leases& leases_;
    std::chrono::milliseconds ttl_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace kiln::journal
