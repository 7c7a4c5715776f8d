// The handover module: its table ([handover]) and the handover stage. The
// product registers it (provisioner/cli/product_stages.cc) and tells the
// returned stage of the nodes the smoke stage quarantines.
#pragma once

#include <memory>

#include "provisioner/engine/stage_registry.h"
#include "provisioner/handover/stage/handover_stage.h"

namespace kiln::handover {

// Registers the module's table and stage, and returns the stage. The
// stage's name must be declared by the caller where pipeline order matters.
std::shared_ptr<HandoverStage> register_handover_module(engine::StageRegistry& registry);

}  // namespace kiln::handover
