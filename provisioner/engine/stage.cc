#include "provisioner/engine/stage.h"

namespace kiln::engine {

Result<nlohmann::json> Stage::inputs(const StageContext& ctx) const {
    return config::node_section_json(ctx.fleet(), ctx.node(), name());
}

std::vector<std::string> Stage::resources(const config::Fleet&, const config::Node&) const { return {}; }

}  // namespace kiln::engine
