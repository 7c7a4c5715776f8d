// Test-only stages (never shipped). Their side effects are observable, so
// tests assert what really happened, not that a function ran.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "provisioner/engine/stage.h"
#include "provisioner/engine/stage_registry.h"

namespace kiln::test {

// A reconciler over a ledger file: the desired state is `actions` entries
// per node; observe reads which are in the ledger; apply appends one line
// with a single O_APPEND write (atomic), so observe after a crash sees
// exactly what happened. Optionally kills its own process with SIGKILL at
// the N-th apply of the process, before or after the write.
class LedgerStage : public engine::Stage {
public:
    struct Options {
        std::string name;
        std::string ledger;  // file shared by every ledger stage
        int actions = 2;
        bool hands_over = false;
        int kill_at = 0;  // 0 = never
        bool kill_after_write = false;
        int interrupt_at = 0;       // raise SIGINT after the N-th apply's write
        int sleep_ms = 0;           // pretend each apply takes this long
        std::string resource_kind;  // "" = none; "bmc" uses the node's BMC URL
        std::string probe;          // "" = none; else counts applies at once across processes
        std::string exclusive;      // "" = none; else each apply holds this name (hold_exclusive)
        std::string gate;           // "" = none; else each apply waits until this file exists
    };
    explicit LedgerStage(Options o) : o_(std::move(o)) {}

    std::string name() const override { return o_.name; }
    bool hands_over() const override { return o_.hands_over; }
    std::vector<std::string> resources(const config::Fleet& fleet, const config::Node& node) const override;
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    // Lines "node stage action" in the ledger, with their counts.
    static std::map<std::string, int> read_ledger(const std::string& path);
    // The probe file's peaks: "total" and "rack:R" -> most applies at once,
    // across every process that shared the file.
    static std::map<std::string, int> read_probe_peaks(const std::string& path);

private:
    Options o_;
};

// Counts how many applies run at once, overall and per rack / resource.
// Each apply holds its slot until `target` are held together (or a safety
// timeout passes), so the maximum reached is deterministic: a correct
// engine reaches exactly its limit and never more.
class ConcurrencyProbe : public engine::Stage {
public:
    ConcurrencyProbe(std::string name, int target, std::string resource_kind = "")
        : name_(std::move(name)), target_(target), resource_kind_(std::move(resource_kind)) {}
    std::string name() const override { return name_; }
    std::vector<std::string> resources(const config::Fleet& fleet, const config::Node& node) const override;
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    int max_total() const { return max_total_; }
    int max_per_rack() const;
    int max_per_resource() const;
    int applies() const { return applies_; }
    bool target_timeouts() const { return timeouts_ > 0; }

private:
    std::string name_;
    int target_;
    std::string resource_kind_;
    std::mutex mu_;
    std::condition_variable cv_;
    int total_ = 0, max_total_ = 0, applies_ = 0, timeouts_ = 0;
    std::map<std::string, int> rack_, max_rack_, res_, max_res_;
    std::set<std::string> done_;
};

// Scripted behaviour per node: fail transiently N times, fail permanently,
// quarantine, or wait (cut short by the stage deadline). Counts attempts.
class ScriptedStage : public engine::Stage {
public:
    // SlowTransient: each attempt works `failures` ms (cut short by the
    // deadline), then fails transiently.
    enum class Mode { Ok, FlakyThenOk, AlwaysTransient, Permanent, Quarantine, Hang, SlowTransient };
    explicit ScriptedStage(std::string name) : name_(std::move(name)) {}
    void script(const std::string& node, Mode mode, int failures = 0) { scripts_[node] = {mode, failures}; }

    std::string name() const override { return name_; }
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    int attempts(const std::string& node) const;
    int successes(const std::string& node) const;

private:
    struct Script {
        Mode mode = Mode::Ok;
        int failures = 0;
    };
    std::string name_;
    std::map<std::string, Script> scripts_;
    mutable std::mutex mu_;
    std::map<std::string, int> attempts_, successes_;
    std::set<std::string> converged_;
};

// A stage whose one action starts something outside kiln and waits for it,
// as a firmware update does: apply appends "node stage start" to the ledger
// (the side effect), then parks for `wait_ms` (or blocks in wait_for where
// the context cannot park, or with `block` set); its resume appends "node
// stage done". Observe reads the ledger: a node whose start is there and
// done is not (a run killed during the wait) is waited for again, never
// started twice. Counts parks, resumes and the most parked at once.
class ParkingStage : public engine::Stage {
public:
    struct Options {
        std::string name = "t-park";
        std::string ledger;
        int wait_ms = 1000;
        bool block = false;  // wait in wait_for, holding the thread
    };
    explicit ParkingStage(Options o) : o_(std::move(o)), wait_ms_(o_.wait_ms) {}

    std::string name() const override { return o_.name; }
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    void set_wait_ms(int ms) { wait_ms_ = ms; }
    int starts() const { return starts_; }  // side effects done by this process
    int parks() const { return parks_; }
    int resumes() const { return resumes_; }
    int parked_now() const { return parked_now_; }
    int peak_parked() const { return peak_parked_; }

private:
    Status append(const std::string& line);
    Options o_;
    std::atomic<int> wait_ms_;
    std::atomic<int> starts_{0}, parks_{0}, resumes_{0}, parked_now_{0}, peak_parked_{0};
};

// The driver's registry: ledger stages alpha, beta, gamma and t-handover,
// configured from KILN_TEST_LEDGER, KILN_TEST_ACTIONS, KILN_TEST_KILL_AT,
// KILN_TEST_KILL_PHASE (before|after), KILN_TEST_INTERRUPT_AT,
// KILN_TEST_SLEEP_MS, KILN_TEST_PROBE (a file counting concurrent applies),
// KILN_TEST_EXCLUSIVE (a name every apply holds exclusively),
// KILN_TEST_GATE (a file every apply waits for, up to two minutes);
// a parking stage t-park waiting KILN_TEST_PARK_MS (default 1000); and the
// greeter module (greeter_module.h), its files beside the ledger.
void register_driver_stages(engine::StageRegistry& registry);

}  // namespace kiln::test
