// The `network` stage: the node's switch ports (and, once network/host's
// applier is wired, its NICs) carry the node's RoCE profile.
//   observe  for each switch the node is cabled to: render the profile for
//            the node's ports, read the running config of those keys, diff
//   plan     one action per switch that differs ("configure:<switch>");
//            drift found on a converged node is work like any other
//   apply    re-read, re-diff and apply that switch's change all or nothing
//            (a re-run after a crash finds nothing to do)
//   verify   read back every switch; any difference left is an error
// resources: "switch:<name>" per switch, so the scheduler's per_switch limit
// keeps one change at a time on each switch (and so on each rail).
//
// Host NICs: the host-side applier (network/host/) is not called yet; the
// observation says so under "host_nics" rather than skipping silently.
#pragma once

#include <functional>
#include <memory>

#include "network/switch_driver.h"
#include "provisioner/engine/stage.h"

namespace kiln::network {

class NetworkStage : public engine::Stage {
public:
    using DriverFactory =
        std::function<Result<std::unique_ptr<SwitchDriver>>(const config::Fleet&, const config::Switch&)>;

    // Default factory: make_switch_driver with the product's transports.
    explicit NetworkStage(DriverFactory factory = {});

    std::string name() const override { return "network"; }
    std::vector<std::string> resources(const config::Fleet& fleet, const config::Node& node) const override;
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

private:
    DriverFactory factory_;
};

}  // namespace kiln::network
