// Cumulus Linux NVUE over its REST API (HTTPS, port 8765, Basic auth).
//
// kiln turns on RoCE lossless mode (`nv set qos roce mode lossless`) and
// keeps its defaults unless the profile overrides them; it writes the
// RoCE-mode values explicitly where it manages a key, so a change behind
// its back (or an older kiln's values) shows as drift. The managed tree:
//   qos/roce                      {enable: on, mode: lossless}
//   qos/mapping/default-global    trust both (RoCE mode's pcp,dscp);
//                                 dscp <roce_dscp> -> lossless priority,
//                                 <cnp_dscp> -> cnp priority, and the other
//                                 DSCPs RoCE mode puts on the lossless
//                                 priority (24-31 for priority 3) -> a lossy one
//   qos/pfc/default-global        switch-priority {<lossless>: {}} (a set:
//                                 any other priority on the switch is drift)
//   qos/congestion-control/default-global/traffic-class/<lossless>
//                                 ecn enable, min/max threshold (bytes),
//                                 probability: RoCE mode's 150000 B, 1500000 B
//                                 and 100 unless the profile writes
//                                 ecn_min_kb / ecn_max_kb / ecn_probability_pct
//   qos/pfc-watchdog              polling-interval (ms), robustness (polls):
//                                 polling-interval x robustness = detection_ms
//   interface/<swpN>/link/mtu     switch_mtu
//   interface/<swpN>/qos/pfc/profile          default-global
//   interface/<swpN>/qos/pfc-watchdog/state   enable
//
// Apply is NVUE's revision flow: POST /nvue_v1/revision, PATCH each top
// object with ?rev=<id> (ids percent-encoded: older releases put '/' in
// them), PATCH /nvue_v1/revision/<id> {"state":"apply","auto-prompt":
// {"ays":"ays_yes"}}, then poll the revision until "applied" (bounded). A
// revision that ends any other way was never applied: the switch stays at
// its previous revision, and the error says so.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "network/switch_driver.h"
#include "network/switch_endpoint.h"
#include "provisioner/net/http_client.h"

namespace kiln::network::nvue {

struct NvueOptions {
    std::chrono::milliseconds poll_interval{250};
    int poll_limit = 240;  // polls before the apply counts as stuck (60 s at 250 ms)
};

// NVUE's PFC watchdog acts after `robustness` polls of a paused queue, so
// a detection time is polling-interval x robustness, with the interval in
// 100..5000 ms and robustness in 1..1000 (NVIDIA, NVUE command reference:
// `nv set qos pfc-watchdog polling-interval`, `... robustness`).
struct NvueWatchdogTiming {
    int polling_interval_ms = 0;
    int robustness = 0;
};

// The finest polling interval whose multiple is exactly `detection_ms`; a
// "network.bad_profile" error when none is (below 100 ms, or no factor in range).
Result<NvueWatchdogTiming> nvue_watchdog_timing(int detection_ms);

// The profile as the NVUE tree above, for `ports` (no I/O). Errors
// ("network.bad_profile") for what NVUE cannot express: a watchdog detection time
// (see nvue_watchdog_timing) or an action other than drop.
Result<nlohmann::json> render_nvue(const network::RoceProfile& profile, const std::vector<Port>& ports);

class NvueDriver : public SwitchDriver {
public:
    NvueDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint, NvueOptions options = {});

    std::string os() const override { return "nvue"; }
    Result<nlohmann::json> render(const network::RoceProfile& profile, const std::vector<Port>& ports) const override;
    Result<nlohmann::json> read_state() override;
    nlohmann::json project_running(const nlohmann::json& state, const std::vector<Port>& ports) const override;
    std::vector<ConfigChange> diff(const nlohmann::json& desired, const nlohmann::json& running) const override;
    Status apply(const nlohmann::json& desired, const nlohmann::json& running) override;

private:
    Result<nlohmann::json> call(const std::string& method, const std::string& target, const nlohmann::json* body);

    std::shared_ptr<net::HttpClient> http_;
    SwitchEndpoint ep_;
    NvueOptions options_;
};

}  // namespace kiln::network::nvue
