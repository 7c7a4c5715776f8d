#include "pipelines/smoke/stage/smoke_module.h"

#include <memory>

#include "pipelines/smoke/stage/smoke_config.h"
#include "pipelines/smoke/stage/transport_factory.h"

namespace kiln::smoke {

void register_smoke_module(engine::StageRegistry& registry, SmokeStageOptions options) {
    if (!options.transport) options.transport = default_transport();
    registry.add_table(smoke_table());
    registry.add(std::make_shared<SmokeStage>(std::move(options)));
}

}  // namespace kiln::smoke
