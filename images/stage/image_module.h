// The images module: its table ([images.NAME], picked by a node's `image`),
// the image stage, and `kiln image`.
// The product registers it (provisioner/cli/product_stages.cc); a build
// without it knows none of these keys or commands.
#pragma once

#include "provisioner/engine/stage_registry.h"

namespace kiln::images {

// Registers the module's tables, stage and commands. The stage's name must
// be declared by the caller where pipeline order matters.
void register_image_module(engine::StageRegistry& registry);

}  // namespace kiln::images
