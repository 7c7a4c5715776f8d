// Cumulus NVUE's REST API as kiln uses it: the applied tree, revisions
// (created, PATCHed per path, applied, polled), reads with ?rev=applied or
// ?rev=<id>. Revision ids hold '/' as older NVUE releases' do, so a client
// that does not percent-encode them fails here as it would there. PATCHes
// are checked against the ranges NVUE's schema has for the keys kiln writes
// (watchdog polling-interval 100-5000 and robustness 1-1000, trust, DSCP
// maps, pfc-watchdog state on swp ports only): a bad value is a 400 and the
// revision keeps its tree. An apply with a watchdog on a port without PFC
// ends "invalid". The tree keeps what is applied, watchdog state included,
// so read-back and drift see it.
#pragma once

#include <map>
#include <string>

#include "network/emulator/switch_service.h"

namespace kiln::network::emulator {

class NvueService : public SwitchService {
public:
    explicit NvueService(std::string user);

    std::string os() const override { return "nvue"; }
    SwitchResponse handle(const SwitchRequest& request, ApplyGate& gate) override;
    nlohmann::json running() const override { return applied_; }
    Status restore(const nlohmann::json& running) override;
    Status change_behind_back(const nlohmann::json& change) override;

private:
    struct Revision {
        std::string state = "pending";  // pending | applying | applied | apply_fail
        nlohmann::json tree;            // the applied tree when created, then patched
        std::string issue;
    };
    SwitchResponse revision_op(const std::string& id, const SwitchRequest& request, ApplyGate& gate);

    std::string user_;
    nlohmann::json applied_;
    std::map<std::string, Revision> revisions_;
    int next_ = 1;
};

}  // namespace kiln::network::emulator
