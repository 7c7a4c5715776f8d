#include "provisioner/handover/handover_inputs.h"

namespace kiln::handover {

nlohmann::json handover_inputs(const config::Fleet& fleet, const config::Node&) {
    using nlohmann::json;
    if (!fleet.handover) return {{"command", json::array()}, {"webhook", ""}, {"secret", nullptr}};
    const auto& h = *fleet.handover;
    return {{"command", h.command},
            {"webhook", h.webhook},
            {"secret", h.webhook_secret ? json(h.webhook_secret->reference()) : json(nullptr)}};
}

}  // namespace kiln::handover
