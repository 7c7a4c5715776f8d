// Cumulus Linux NVUE over its REST API (HTTPS, port 8765, Basic auth).
//
// The managed tree (NVUE's own object model):
//   qos/roce                      {enable: on, mode: lossless}
//   qos/mapping/default-global    trust l3; dscp <roce_dscp> -> lossless
//                                 priority, <cnp_dscp> -> cnp priority
//   qos/pfc/default-global        switch-priority {<lossless>: {}} (a set:
//                                 any other priority on the switch is drift)
//   qos/congestion-control/default-global/traffic-class/<lossless>
//                                 ecn enable, min/max threshold (bytes), probability
//   qos/pfc-watchdog              polling-interval (ms, from detection_ms),
//                                 robustness (restoration_ms / detection_ms)
//   interface/<swpN>/link/mtu     switch_mtu
//   interface/<swpN>/qos/pfc/profile   default-global
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

// The profile as the NVUE tree above, for `ports` (no I/O).
Result<nlohmann::json> render_nvue(const config::RoceProfile& profile, const std::vector<Port>& ports);

class NvueDriver : public SwitchDriver {
public:
    NvueDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint, NvueOptions options = {});

    std::string os() const override { return "nvue"; }
    Result<nlohmann::json> render(const config::RoceProfile& profile, const std::vector<Port>& ports) const override;
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
