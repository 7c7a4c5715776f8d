// The firmware module: its tables ([firmware.NAME], [bios.NAME], [host_os.NAME]
// with the node keys that pick them, and [artifact_server]), the firmware
// stage, and `kiln firmware`.
// The product registers it (provisioner/cli/product_stages.cc); a build
// without it knows none of these keys or commands.
#pragma once

#include "provisioner/engine/stage_registry.h"

namespace kiln::firmware {

// Registers the module's tables, stage and commands. The stage's name must
// be declared by the caller where pipeline order matters.
void register_firmware_module(engine::StageRegistry& registry);

}  // namespace kiln::firmware
