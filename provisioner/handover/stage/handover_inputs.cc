#include "provisioner/handover/stage/handover_inputs.h"

#include "provisioner/handover/stage/handover_config.h"

namespace kiln::handover {

nlohmann::json handover_inputs(const config::Fleet& fleet, const config::Node&) {
    using nlohmann::json;
    const HandoverHook* hook = handover_hook(fleet);
    if (!hook) return {{"command", json::array()}, {"webhook", ""}, {"secret", nullptr}};
    const auto& h = *hook;
    return {{"command", h.command},
            {"webhook", h.webhook},
            {"secret", h.webhook_secret ? json(h.webhook_secret->reference()) : json(nullptr)}};
}

}  // namespace kiln::handover
