// The stage contract (DESIGN §2): every stage is a reconciler.
//   observe  read what is really there
//   plan     concrete actions; empty means converged
//   apply    perform one action; idempotent, safe to re-run after a crash
//   verify   observe again and prove the desired state holds
// One Stage instance serves every node of a run from several threads at
// once: keep per-node state in the context, not in the stage.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/engine/cancel.h"

namespace kiln::engine {

struct Action {
    std::string id;           // stable within (node, stage), e.g. "flash:BIOS:2.1"
    std::string description;  // one line for people
    nlohmann::json detail = nlohmann::json::object();
};

struct Observation {
    nlohmann::json state = nlohmann::json::object();
    // Warnings for people about what was seen but is not work (a setting the
    // hardware lacks, a change waiting for a reboot). `kiln plan` prints them
    // under the node-stage; runs journal each as a "warning" event and print it.
    std::vector<std::string> notes;
};

// What a stage may see and use while it runs on one node.
class StageContext {
public:
    using Clock = std::chrono::steady_clock;
    using ProgressFn = std::function<void(const std::string& message, int percent)>;
    using EventFn = std::function<void(const std::string& kind, const std::string& message)>;

    StageContext(const config::Fleet& fleet, const config::Node& node, std::string stage, const StopToken& stop,
                 Clock::time_point deadline, ProgressFn progress, EventFn event)
        : fleet_(fleet),
          node_(node),
          stage_(std::move(stage)),
          stop_(stop),
          deadline_(deadline),
          progress_(std::move(progress)),
          event_(std::move(event)) {}

    const config::Fleet& fleet() const { return fleet_; }
    const config::Node& node() const { return node_; }
    const std::string& stage() const { return stage_; }

    // This stage's input hash and the one of its last verified run, if any.
    const std::string& input_hash() const { return input_hash_; }
    const std::optional<std::string>& last_verified_hash() const { return last_verified_; }
    void set_hashes(std::string input, std::optional<std::string> last) {
        input_hash_ = std::move(input);
        last_verified_ = std::move(last);
    }
    // Set by `kiln reimage`: redo this stage's work even where observe shows
    // it done (a fresh disk, a fresh VM).
    bool reimage() const { return reimage_; }
    void set_reimage(bool on) { reimage_ = on; }

    // True once the run is stopping hard or this stage's deadline passed:
    // a long wait or loop should return at its next safe point.
    bool should_stop() const { return stop_.hard() || Clock::now() >= deadline_; }
    // True once any stop was requested (first SIGINT): finish the current
    // action, start no other.
    bool stopping() const { return stop_.soft(); }
    bool deadline_passed() const { return Clock::now() >= deadline_; }
    Clock::time_point deadline() const { return deadline_; }
    // Sleeps up to `d`; false when cut short by a hard stop or the deadline.
    // Holds this thread: a wait that can be resumed should park instead.
    bool wait_for(std::chrono::milliseconds d) const;

    // Parking (docs/engine.md "Parked waits"): an apply that has started
    // something outside kiln and must wait for it (a Redfish task, a
    // restart) may hand the engine a wake-up time, an optional event key and
    // a small resume state, and return the Status that park() gives back.
    // Its thread goes back to the pool; at `until` (or at wake(key), or at
    // the stage deadline, or at a stop) the engine calls apply again with
    // the same action, and resumed() returns `state`. A resumed apply goes
    // on from there and must not repeat what it did before parking. When
    // the deadline or a stop comes first, apply is not called again: the
    // engine ends the action as timed out or interrupted, naming `reason`.
    // The state lives in memory only: after a crash the next run observes
    // afresh, so apply stays idempotent as ever.
    // can_park() is false where nothing would resume it (plan, a context
    // built by hand): wait with wait_for there.
    struct ParkRequest {
        Clock::time_point until;
        nlohmann::json state;
        std::string reason;  // one line: what is being waited for
        std::string key;     // "" = time only
    };
    bool can_park() const { return can_park_; }
    void set_can_park(bool on) { can_park_ = on; }
    Status park(Clock::time_point until, nlohmann::json state, std::string reason, std::string key = "");
    Status park_for(std::chrono::milliseconds d, nlohmann::json state, std::string reason, std::string key = "") {
        return park(Clock::now() + d, std::move(state), std::move(reason), std::move(key));
    }
    // The state the previous park() left for this action; null when this
    // apply is not a resume.
    const nlohmann::json* resumed() const { return resumed_ ? &*resumed_ : nullptr; }
    void set_resumed(std::optional<nlohmann::json> state) { resumed_ = std::move(state); }
    // Taken by the engine after apply returns.
    std::optional<ParkRequest> take_park() { return std::exchange(park_, std::nullopt); }
    // Resumes every parked wait of this run on `key` (e.g. the last node to
    // reach a meeting wakes those waiting for it). Callable from any node.
    using WakeFn = std::function<void(const std::string& key)>;
    void set_wake(WakeFn fn) { wake_ = std::move(fn); }
    void wake(const std::string& key) const {
        if (wake_) wake_(key);
    }

    // Whether another node of this run may still reach its next stages:
    // selected, and its pipeline has not ended. Stages that meet across
    // nodes (a shared smoke ring) wait only for nodes that can still come.
    // In a plan: every selected node. False without an engine (a context
    // built by hand).
    using NodePendingFn = std::function<bool(const std::string& node)>;
    void set_node_pending(NodePendingFn fn) { node_pending_ = std::move(fn); }
    bool node_pending(const std::string& node) const { return node_pending_ && node_pending_(node); }

    // An exclusive hold by name ("switch:spine-1") for a short critical
    // section on a shared thing that resources() do not hold for the whole
    // stage: in this process and, on a store shared by workers, across
    // every worker (engine/exclusive_locks.h). Waits until the deadline or
    // a hard stop; the hold ends when the returned object is destroyed.
    class Hold {
    public:
        virtual ~Hold() = default;
    };
    using HoldFn = std::function<Result<std::unique_ptr<Hold>>(const StageContext& ctx, const std::string& key)>;
    void set_hold_exclusive(HoldFn fn) { hold_ = std::move(fn); }
    // Without an engine (a context built by hand): this process only.
    Result<std::unique_ptr<Hold>> hold_exclusive(const std::string& key) const;

    // Records a stage publishes for later stages and the report (the
    // journal's NodeRecord: a kind, its body's schema version, a JSON body),
    // and the newest one of a kind for a node. Without a journal (a context
    // built by hand) publish fails and latest finds none.
    struct Published {
        std::string kind;
        int schema = 0;
        nlohmann::json body;
        int64_t run_id = 0;
        std::string stage;
        int64_t ts_ms = 0;
    };
    using PublishFn = std::function<Status(const std::string& kind, int schema, const nlohmann::json& body)>;
    using LatestFn = std::function<Result<std::optional<Published>>(const std::string& node, const std::string& kind)>;
    void set_records(PublishFn publish, LatestFn latest) {
        publish_ = std::move(publish);
        latest_ = std::move(latest);
    }
    Status publish(const std::string& kind, int schema, const nlohmann::json& body) const;
    Result<std::optional<Published>> latest(const std::string& kind) const { return latest_for(node_.name, kind); }
    Result<std::optional<Published>> latest_for(const std::string& node, const std::string& kind) const;

    void progress(const std::string& message, int percent = -1) const {
        if (progress_) progress_(message, percent);
    }
    void event(const std::string& kind, const std::string& message) const {
        if (event_) event_(kind, message);
    }

private:
    const config::Fleet& fleet_;
    const config::Node& node_;
    std::string stage_;
    const StopToken& stop_;
    Clock::time_point deadline_;
    ProgressFn progress_;
    EventFn event_;
    std::string input_hash_;
    std::optional<std::string> last_verified_;
    bool reimage_ = false;
    NodePendingFn node_pending_;
    bool can_park_ = false;
    std::optional<ParkRequest> park_;
    std::optional<nlohmann::json> resumed_;
    WakeFn wake_;
    HoldFn hold_;
    PublishFn publish_;
    LatestFn latest_;
};

// What a stage that states no inputs of its own depends on: the node's
// name, rack, role and labels. The engine hashes a pipeline's stage that
// this build lacks the same way.
nlohmann::json node_identity_inputs(const config::Node& node);

class Stage {
public:
    virtual ~Stage() = default;
    virtual std::string name() const = 0;

    // The inputs this stage depends on for one node, as canonical JSON:
    // each stage states what its config is (a shipped stage in its
    // <stage>_inputs.h). The engine hashes them together with the previous
    // stage's hash. Default: node_identity_inputs.
    virtual Result<nlohmann::json> inputs(const StageContext& ctx) const;
    // inputs() as the text the engine hashes: inputs(ctx)->dump(). A stage
    // whose nodes share large parts of their inputs (the network stage: the
    // uplinks of shared leaves) may build the same text from pieces it
    // serialises once per run (begin_run..end_run; the engine hashes inside
    // one). Must equal inputs(ctx)->dump() byte for byte: hashes are journaled.
    virtual Result<std::string> input_text(const StageContext& ctx) const;

    // Shared things this stage holds while it runs, as "kind:id"
    // ("bmc:10.1.2.3:443", "switch:leaf-1"). The scheduler caps each kind.
    virtual std::vector<std::string> resources(const config::Fleet& fleet, const config::Node& node) const;

    // True for the stage that hands the node over: its success marks it ready.
    virtual bool hands_over() const { return false; }

    // Called around each plan and each run of an engine, with its fleet: a
    // stage may keep what all nodes of that plan or run share (the network
    // stage's fabric and switch reads) from begin_run until end_run, and
    // must drop it there. Runs of different fleets may overlap. Default:
    // nothing kept.
    virtual void begin_run(const config::Fleet& /*fleet*/) {}
    virtual void end_run(const config::Fleet& /*fleet*/) {}

    virtual Result<Observation> observe(StageContext& ctx) = 0;
    virtual Result<std::vector<Action>> plan(StageContext& ctx, const Observation& observed) = 0;
    virtual Status apply(StageContext& ctx, const Action& action) = 0;
    virtual Status verify(StageContext& ctx) = 0;
};

}  // namespace kiln::engine
