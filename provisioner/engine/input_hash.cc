#include "provisioner/engine/input_hash.h"

#include "provisioner/core/sha256.h"

namespace kiln::engine {

std::string chain_hash(const std::string& stage, const nlohmann::json& inputs, const std::string& previous) {
    Sha256 h;
    h.update("kiln-stage-v1\n");
    h.update(stage);
    h.update("\n");
    h.update(inputs.dump());  // nlohmann::json sorts object keys: canonical
    h.update("\n");
    h.update(previous);
    return h.hex();
}

}  // namespace kiln::engine
