#include "provisioner/handover/stage/handover_module.h"

#include "provisioner/handover/stage/handover_config.h"

namespace kiln::handover {

std::shared_ptr<HandoverStage> register_handover_module(engine::StageRegistry& registry) {
    auto stage = std::make_shared<HandoverStage>();
    registry.add_table(handover_table());
    registry.add(stage);
    return stage;
}

}  // namespace kiln::handover
