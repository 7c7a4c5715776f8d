// Arista eAPI as kiln uses it: JSON-RPC runCmds at /command-api, with the
// running config as EOS's nested lines ({"cmds": {"interface Ethernet1/1":
// {"cmds": {"mtu 9214": null}}}}), config modes (interface, and the queue
// mode of the model's platform), `no` forms, configure sessions with commit
// and abort, `show version` (modelName) and `show running-config` in JSON.
// A command it does not know fails the call as EOS does ("invalid
// command"), with the commands before it kept only in config mode, never in
// a session. The model decides the queue mode: VOQ (Sand) platforms take
// `uc-tx-queue N` and refuse `tx-queue N`; the others the reverse.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "network/emulator/switch_service.h"

namespace kiln::network::emulator {

// The models the emulator answers as, with their platform's queue mode.
struct EosModel {
    const char* name;  // modelName in show version
    const char* chip;
    bool voq;
};
const std::vector<EosModel>& emulated_eos_models();
// The default: a non-VOQ switch (tx-queue), as the emulator always was.
inline const char* const kDefaultEosModel = "DCS-7050CX3-32S";
// The known model of that name; nullptr when the emulator has none.
const EosModel* find_eos_model(const std::string& name);

class EapiService : public SwitchService {
public:
    // `model` must be one of emulated_eos_models() (EmulatedSwitch checks).
    explicit EapiService(const std::string& model = kDefaultEosModel);

    std::string os() const override { return "eos"; }
    SwitchResponse handle(const SwitchRequest& request, ApplyGate& gate) override;
    nlohmann::json running() const override { return running_; }
    Status restore(const nlohmann::json& running) override;
    Status change_behind_back(const nlohmann::json& change) override;

private:
    // Runs one command; false with `error` set when EOS would refuse it.
    struct Cursor {
        nlohmann::json* tree = nullptr;  // the config being edited (running or a session copy)
        std::vector<std::string> mode;   // "interface X", "tx-queue 3"
        std::string session;             // "" = not in a session
        bool config = false;
        bool enabled = false;
    };
    bool run(const std::string& cmd, Cursor& cur, nlohmann::json& result, std::string& error, ApplyGate& gate);
    bool enters_mode(const std::vector<std::string>& mode, const std::string& line) const;

    EosModel model_;
    nlohmann::json running_;
    std::map<std::string, nlohmann::json> sessions_;
};

// The key under which EOS keeps a config line, so that "mtu 9214" replaces
// "mtu 1500": the line without its value where the line sets one.
std::string eos_line_key(const std::string& line);

}  // namespace kiln::network::emulator
