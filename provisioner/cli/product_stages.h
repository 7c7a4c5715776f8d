// The shipped `kiln`'s assembly of stage modules (product_stages.cc): the
// CLI's, not the engine's, which names no stage. A test binary or another
// product assembles its own registry.
#pragma once

#include "provisioner/engine/stage_registry.h"

namespace kiln::engine {

// Declares the shipped stages in pipeline order and registers each module
// (its tables, stage and commands), with smoke wired to handover.
void register_product_stages(StageRegistry& registry);

}  // namespace kiln::engine
