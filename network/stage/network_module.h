// The network module: its table ([network.NAME], picked by a node's `network`),
// the network stage, and `kiln network`.
// The product registers it (provisioner/cli/product_stages.cc); a build
// without it knows none of these keys or commands.
#pragma once

#include "provisioner/engine/stage_registry.h"

namespace kiln::network {

// Registers the module's tables, stage and commands. The stage's name must
// be declared by the caller where pipeline order matters.
void register_network_module(engine::StageRegistry& registry);

}  // namespace kiln::network
