// A stage's input hash: its inputs chained with the previous stage's hash,
// so a change upstream (new firmware, new image) re-runs what follows.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::engine {

std::string chain_hash(const std::string& stage, const nlohmann::json& inputs, const std::string& previous);
// The same on inputs already serialised (inputs.dump()).
std::string chain_hash_text(const std::string& stage, const std::string& inputs_text, const std::string& previous);

// A chain hash held in 32 bytes instead of 64 hex characters on the heap: a
// run holds one per selected node-stage (600,000 at 100,000 nodes of six
// stages). hex() gives chain_hash's form back.
class StageHash {
public:
    StageHash() = default;
    // Takes chain_hash's output: 64 lowercase hex digits.
    explicit StageHash(const std::string& hex);
    std::string hex() const;
    bool operator==(const StageHash&) const = default;

private:
    std::array<uint8_t, 32> bytes_{};
};

}  // namespace kiln::engine
