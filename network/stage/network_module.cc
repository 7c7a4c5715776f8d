#include "network/stage/network_module.h"

#include <memory>

#include "network/stage/network_command.h"
#include "network/stage/network_config.h"
#include "network/stage/network_stage.h"

namespace kiln::network {

void register_network_module(engine::StageRegistry& registry) {
    registry.add_table(network_table());
    registry.add(std::make_shared<NetworkStage>());
    registry.add_command(network_command());
}

}  // namespace kiln::network
