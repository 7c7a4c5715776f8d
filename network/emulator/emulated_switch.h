// One emulated switch: its OS service, Basic auth, fault injection, the
// state file, and the control path tests and operators use:
//   GET  /_emulator/faults                     the current faults
//   PUT  /_emulator/faults   {"delay_ms": N, "fail_applies": N}
//        delay_ms: every API answer waits that long (a client timeout);
//        fail_applies: the next N applies fail (-1: all of them, 0: none)
//   GET  /_emulator/running                    the running config, raw
//   POST /_emulator/running  <change>          a change behind kiln's back
//        (NVUE: a JSON merge patch; EOS: {"cmds": [config lines]})
// The control path takes the same credentials as the API. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "network/emulator/switch_service.h"

namespace kiln::network::emulator {

struct Faults {
    int delay_ms = 0;
    int fail_applies = 0;  // -1: every apply fails
};

// "delay=2000", "fail-applies=1", "fail-applies=all"; several joined by ','.
Result<Faults> parse_faults(const std::string& spec);

struct SwitchSpec {
    std::string name;
    std::string os;     // nvue | eos
    std::string model;  // eos: the modelName (emulated_eos_models()); "" = kDefaultEosModel
    std::string user = "admin";
    std::string password;
    std::string state_file;  // "" = memory only
    Faults faults;
};

class EmulatedSwitch : public ApplyGate {
public:
    // Loads the state file when it exists. Errors: "emulator.bad_os", "emulator.bad_model",
    // "emulator.state_unreadable", "emulator.state_malformed".
    static Result<std::unique_ptr<EmulatedSwitch>> open(const SwitchSpec& spec);

    SwitchResponse handle(const SwitchRequest& request);
    bool allow_apply() override;  // called with the lock held

    const std::string& name() const { return spec_.name; }
    const std::string& os() const { return spec_.os; }
    nlohmann::json running() const;
    Status change_behind_back(const nlohmann::json& change);
    void set_faults(const Faults& f);
    Faults faults() const;

private:
    explicit EmulatedSwitch(SwitchSpec spec) : spec_(std::move(spec)) {}
    bool authorised(const SwitchRequest& request) const;
    Status save() const;  // with the lock held

    SwitchSpec spec_;
    std::unique_ptr<SwitchService> service_;
    mutable std::mutex mu_;
    Faults faults_;
};

}  // namespace kiln::network::emulator
