// What the vm stage's input hash covers for one node, stated by the stage
// itself: the VM shape, the image the VMs boot and the node's hypervisor.
#pragma once

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"

namespace kiln::vm {

// Canonical JSON; keys that older fleets never wrote appear only when set,
// so those fleets keep the hashes their journals hold.
nlohmann::json vm_inputs(const config::Fleet& fleet, const config::Node& node);

}  // namespace kiln::vm
