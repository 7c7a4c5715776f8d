#include "firmware/stage/firmware_module.h"

#include <memory>

#include "firmware/stage/firmware_command.h"
#include "firmware/stage/firmware_config.h"
#include "firmware/stage/firmware_stage.h"

namespace kiln::firmware {

void register_firmware_module(engine::StageRegistry& registry) {
    for (auto& table : firmware_tables()) registry.add_table(std::move(table));
    registry.add(std::make_shared<FirmwareStage>());
    registry.add_command(firmware_command());
}

}  // namespace kiln::firmware
