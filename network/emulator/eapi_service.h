// Arista eAPI as kiln uses it: JSON-RPC runCmds at /command-api, with the
// running config as EOS's nested lines ({"cmds": {"interface Ethernet1/1":
// {"cmds": {"mtu 9214": null}}}}), config modes (interface, tx-queue),
// `no` forms, configure sessions with commit and abort, and `show
// running-config` in JSON. A command it does not know fails the call as
// EOS does ("invalid command"), with the commands before it kept only in
// config mode, never in a session.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "network/emulator/switch_service.h"

namespace kiln::network::emulator {

class EapiService : public SwitchService {
public:
    EapiService();

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

    nlohmann::json running_;
    std::map<std::string, nlohmann::json> sessions_;
};

// The key under which EOS keeps a config line, so that "mtu 9214" replaces
// "mtu 1500": the line without its value where the line sets one.
std::string eos_line_key(const std::string& line);

}  // namespace kiln::network::emulator
