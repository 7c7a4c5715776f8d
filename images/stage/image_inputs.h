// What the image stage's input hash covers for one node from the fleet
// config, stated by the stage itself: the image profile and its recipe's
// path. ImageStage::inputs adds the recipe's final layer key, which covers
// the recipe's contents, its input files and the package mirror.
#pragma once

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"

namespace kiln::images {

nlohmann::json image_inputs(const config::Fleet& fleet, const config::Node& node);

}  // namespace kiln::images
