// What the handover stage's input hash covers for one node, stated by the
// stage itself: the fleet's hook (its command, or its webhook with the
// secret as its reference).
#pragma once

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"

namespace kiln::handover {

nlohmann::json handover_inputs(const config::Fleet& fleet, const config::Node& node);

}  // namespace kiln::handover
