#include "images/image_inputs.h"

namespace kiln::images {

nlohmann::json image_inputs(const config::Fleet& fleet, const config::Node& node) {
    auto it = fleet.images.find(node.image);
    return {{"image", node.image}, {"recipe", it == fleet.images.end() ? "" : it->second.recipe}};
}

}  // namespace kiln::images
