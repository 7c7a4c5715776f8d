// A stage's input hash: its inputs chained with the previous stage's hash,
// so a change upstream (new firmware, new image) re-runs what follows.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::engine {

std::string chain_hash(const std::string& stage, const nlohmann::json& inputs, const std::string& previous);

}  // namespace kiln::engine
