// Arista EOS over eAPI: JSON-RPC `runCmds` POSTed to /command-api with
// Basic auth.
//
// The driver's structured form (what render, read_running and diff use):
//   qos/dscp-map/<dscp>            traffic class      qos map dscp D to traffic-class T
//   pfc-watchdog/timeout           seconds, "0.2"     priority-flow-control pause watchdog default timeout S
//   pfc-watchdog/recovery-time     seconds            ... default recovery-time S
//   pfc-watchdog/action            drop | notify-only (EOS has no "forward"; alert maps to notify-only)
//   interfaces/<port>/mtu          switch_mtu, capped at EOS's 9214
//   interfaces/<port>/qos-trust    dscp               qos trust dscp
//   interfaces/<port>/pfc          on                 priority-flow-control on
//   interfaces/<port>/pfc-no-drop  [priorities]       priority-flow-control priority N no-drop
//   interfaces/<port>/tx-queue/<q>/ecn {min-kbytes, max-kbytes, probability}
//                                  random-detect ecn minimum-threshold A kbytes
//                                  maximum-threshold B kbytes max-mark-probability P
//
// Read back: `show running-config` in JSON (EOS nests each mode's lines
// under "cmds"), parsed into the form above; lines kiln does not manage are
// ignored. Apply: one configure session with every line, then `commit`; if
// any command fails the session is aborted, so the running config is left
// as it was.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "network/switch_driver.h"
#include "network/switch_endpoint.h"
#include "provisioner/net/http_client.h"

namespace kiln::network::eos {

// EOS's largest interface MTU.
constexpr int kMaxMtu = 9214;

Result<nlohmann::json> render_eos(const config::RoceProfile& profile, const std::vector<Port>& ports);

// The config lines (in session order, modes entered and left) that take
// `running` to `desired`; no "configure session"/"commit" around them.
std::vector<std::string> eos_config_lines(const nlohmann::json& desired, const nlohmann::json& running);

// `show running-config` JSON ({"cmds": {...}}) -> the structured form, for `ports`.
nlohmann::json parse_running_config(const nlohmann::json& show, const std::vector<Port>& ports);

class EosDriver : public SwitchDriver {
public:
    EosDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint);

    std::string os() const override { return "eos"; }
    Result<nlohmann::json> render(const config::RoceProfile& profile, const std::vector<Port>& ports) const override;
    Result<nlohmann::json> read_state() override;
    nlohmann::json project_running(const nlohmann::json& state, const std::vector<Port>& ports) const override;
    std::vector<ConfigChange> diff(const nlohmann::json& desired, const nlohmann::json& running) const override;
    Status apply(const nlohmann::json& desired, const nlohmann::json& running) override;

    // One runCmds call; the "result" array, or the JSON-RPC error as an Error.
    Result<nlohmann::json> run_cmds(const std::vector<std::string>& cmds);

private:
    std::shared_ptr<net::HttpClient> http_;
    SwitchEndpoint ep_;
    int sessions_ = 0;
};

}  // namespace kiln::network::eos
