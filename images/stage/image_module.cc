#include "images/stage/image_module.h"

#include <memory>

#include "images/stage/image_command.h"
#include "images/stage/image_config.h"
#include "images/stage/image_stage.h"

namespace kiln::images {

void register_image_module(engine::StageRegistry& registry) {
    registry.add_table(image_table());
    registry.add(std::make_shared<ImageStage>());
    registry.add_command(image_command());
}

}  // namespace kiln::images
