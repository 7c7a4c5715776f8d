// What the firmware stage's input hash covers for one node, stated by the
// stage itself: the BMC it talks to (the password as its reference), the
// firmware components, the BIOS intents and the host OS image.
#pragma once

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"

namespace kiln::firmware {

// Canonical JSON; keys that older fleets never wrote appear only when set,
// so those fleets keep the hashes their journals hold.
nlohmann::json firmware_inputs(const config::Fleet& fleet, const config::Node& node);

}  // namespace kiln::firmware
