#include "provisioner/vm/stage/vm_module.h"

#include <memory>

#include "provisioner/vm/stage/host_command.h"
#include "provisioner/vm/stage/vm_command.h"
#include "provisioner/vm/stage/vm_config.h"
#include "provisioner/vm/stage/vm_stage.h"

namespace kiln::vm {

void register_vm_module(engine::StageRegistry& registry) {
    registry.add_table(vm_table());
    registry.add(std::make_shared<VmStage>(default_vm_stage_deps()));
    registry.add_command(vm_command());
    registry.add_command(host_command());
}

}  // namespace kiln::vm
