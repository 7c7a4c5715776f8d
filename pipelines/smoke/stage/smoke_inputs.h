// What the smoke stage's input hash covers for one node, stated by the
// stage itself: its profile's thresholds and timeout, the fleet-relative
// verdict and the RDMA writes' shape, and for a shared ring its members.
#pragma once

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"

namespace kiln::smoke {

// Canonical JSON; keys that older fleets never wrote appear only when set,
// so those fleets keep the hashes their journals hold.
nlohmann::json smoke_inputs(const config::Fleet& fleet, const config::Node& node);

}  // namespace kiln::smoke
