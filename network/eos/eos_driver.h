// Arista EOS over eAPI: JSON-RPC `runCmds` POSTed to /command-api with
// Basic auth.
//
// The driver's structured form (what render, read_running and diff use):
//   qos/dscp-map/<dscp>            traffic class      qos map dscp D to traffic-class T
//   pfc-watchdog/timeout           seconds, "0.2"     priority-flow-control pause watchdog default timeout S
//   pfc-watchdog/recovery-time     seconds            ... default recovery-time S
//   pfc-watchdog/polling-interval  seconds            ... default polling-interval S
//   pfc-watchdog/action            drop | notify-only (EOS has no "forward"; alert maps to notify-only)
//   interfaces/<port>/mtu          switch_mtu, capped at EOS's 9214
//   interfaces/<port>/qos-trust    dscp               qos trust dscp
//   interfaces/<port>/pfc          on                 priority-flow-control on
//   interfaces/<port>/pfc-no-drop  [priorities]       priority-flow-control priority N no-drop
//   interfaces/<port>/pfc-watchdog on                 priority-flow-control pause watchdog
//   interfaces/<port>/queue/<q>/ecn {min-kbytes, max-kbytes, probability}
//                                  tx-queue Q (uc-tx-queue Q on VOQ platforms), then
//                                  random-detect ecn minimum-threshold A kbytes
//                                  maximum-threshold B kbytes max-mark-probability P
//
// The queue command depends on the platform: VOQ (Sand: Arad, Jericho)
// families take `uc-tx-queue N` and refuse `tx-queue N`, which would abort
// the whole session. The driver reads `show version` (modelName) with the
// running config, and before an apply when it has not yet.
//
// Read back: `show running-config` in JSON (EOS nests each mode's lines
// under "cmds"), parsed into the form above; lines kiln does not manage are
// ignored. Apply: one configure session with every line, then `commit`; if
// any command fails the session is aborted, so the running config is left
// as it was.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "network/switch_driver.h"
#include "network/switch_endpoint.h"
#include "provisioner/net/http_client.h"

namespace kiln::network::eos {

// EOS's largest interface MTU.
constexpr int kMaxMtu = 9214;

// The platform as `show version` names it.
struct EosPlatform {
    std::string model;  // modelName, "DCS-7280CR3-32P4-F"
    bool voq = false;
    const char* queue_command() const { return voq ? "uc-tx-queue" : "tx-queue"; }
};

// Whether a modelName is of a VOQ (Sand) family: 7280 (E/R/R2/R3), the
// 7500 and 7800 chassis (75xx, 78xx), 7020R. Others (7050X, 7060X, 7260X,
// 7300X, 7358X, 7368X, 7388X, ...) are not.
bool eos_model_is_voq(const std::string& model_name);

// From `show version` JSON; an "network.eos_platform_unknown" error without a modelName.
Result<EosPlatform> eos_platform(const nlohmann::json& show_version);

// Errors ("network.bad_profile") for watchdog times EOS cannot take: timeout and
// recovery-time are 0.01..60 s in steps of 0.01 s.
Result<nlohmann::json> render_eos(const network::RoceProfile& profile, const std::vector<Port>& ports);

// The config lines (in session order, modes entered and left) that take
// `running` to `desired` on `platform`; no "configure session"/"commit"
// around them.
std::vector<std::string> eos_config_lines(const nlohmann::json& desired, const nlohmann::json& running,
                                          const EosPlatform& platform);

// `show running-config` JSON ({"cmds": {...}}) -> the structured form, for `ports`.
nlohmann::json parse_running_config(const nlohmann::json& show, const std::vector<Port>& ports);

class EosDriver : public SwitchDriver {
public:
    EosDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint);

    std::string os() const override { return "eos"; }
    Result<nlohmann::json> render(const network::RoceProfile& profile, const std::vector<Port>& ports) const override;
    Result<nlohmann::json> read_state() override;
    nlohmann::json project_running(const nlohmann::json& state, const std::vector<Port>& ports) const override;
    std::vector<ConfigChange> diff(const nlohmann::json& desired, const nlohmann::json& running) const override;
    Status apply(const nlohmann::json& desired, const nlohmann::json& running) override;

    // One runCmds call; the "result" array, or the JSON-RPC error as an Error.
    Result<nlohmann::json> run_cmds(const std::vector<std::string>& cmds);

private:
    // `show version` of this switch, read with the running config or before an apply.
    Result<EosPlatform> platform();

    std::shared_ptr<net::HttpClient> http_;
    SwitchEndpoint ep_;
    std::optional<EosPlatform> platform_;
    int sessions_ = 0;
};

}  // namespace kiln::network::eos
