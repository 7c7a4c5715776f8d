// What an emulated switch OS answers: its API (NVUE REST or eAPI), its
// running config as one JSON document (kept in the state file), and a way
// to change that config behind kiln's back for drift tests.
// Implementations are not thread-safe: EmulatedSwitch serialises calls.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "network/emulator/switch_exchange.h"
#include "provisioner/core/result.h"

namespace kiln::network::emulator {

// Told to the service for each apply (NVUE revision apply, eAPI commit).
class ApplyGate {
public:
    virtual ~ApplyGate() = default;
    // False: this apply must fail (fault injection).
    virtual bool allow_apply() = 0;
};

class SwitchService {
public:
    virtual ~SwitchService() = default;
    virtual std::string os() const = 0;
    virtual SwitchResponse handle(const SwitchRequest& request, ApplyGate& gate) = 0;
    // The running (applied) config.
    virtual nlohmann::json running() const = 0;
    virtual Status restore(const nlohmann::json& running) = 0;
    // A change made on the switch by someone else: NVUE takes a JSON merge
    // patch of the applied tree; EOS {"cmds": ["interface Ethernet1/1", "mtu 1500"]}
    // run in config mode.
    virtual Status change_behind_back(const nlohmann::json& change) = 0;
};

}  // namespace kiln::network::emulator
