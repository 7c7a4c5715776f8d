// The vm module: its table ([vm.NAME], picked by a node's `vm`), the vm
// stage, `kiln vm` and `kiln host`.
// The product registers it (provisioner/cli/product_stages.cc); a build
// without it knows none of these keys or commands.
#pragma once

#include "provisioner/engine/stage_registry.h"

namespace kiln::vm {

// Registers the module's tables, stage and commands. The stage's name must
// be declared by the caller where pipeline order matters.
void register_vm_module(engine::StageRegistry& registry);

}  // namespace kiln::vm
