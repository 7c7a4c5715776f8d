#include "images/image_module.h"

#include <memory>

#include "images/image_command.h"
#include "images/image_config.h"
#include "images/image_stage.h"

namespace kiln::images {

void register_image_module(engine::StageRegistry& registry) {
    registry.add_table(image_table());
    registry.add(std::make_shared<ImageStage>());
    registry.add_command(image_command());
}

}  // namespace kiln::images
