// The smoke module: its table ([smoke.NAME], picked by a node's `smoke`)
// and the smoke stage. The product registers it (provisioner/cli/
// product_stages.cc) with the seams it wires to other modules in `options`:
// who hears of a quarantine, how a VM's host devices are named.
#pragma once

#include "pipelines/smoke/stage/smoke_stage.h"
#include "provisioner/engine/stage_registry.h"

namespace kiln::smoke {

// Registers the module's table and stage. A null `options.transport` is
// the shipped one (transport_factory.h). The stage's name must be declared
// by the caller where pipeline order matters.
void register_smoke_module(engine::StageRegistry& registry, SmokeStageOptions options);

}  // namespace kiln::smoke
