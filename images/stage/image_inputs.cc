#include "images/stage/image_inputs.h"

#include "images/stage/image_config.h"

namespace kiln::images {

nlohmann::json image_inputs(const config::Fleet& fleet, const config::Node& node) {
    const ImageProfile* p = image_profile(fleet, node);
    return {{"image", node.profile(kImageNodeKey)}, {"recipe", p ? p->recipe : ""}};
}

}  // namespace kiln::images
