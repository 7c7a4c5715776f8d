#include "provisioner/engine/input_hash.h"

#include "provisioner/core/sha256.h"

namespace kiln::engine {

std::string chain_hash(const std::string& stage, const nlohmann::json& inputs, const std::string& previous) {
    return chain_hash_text(stage, inputs.dump(), previous);  // nlohmann::json sorts object keys: canonical
}

std::string chain_hash_text(const std::string& stage, const std::string& inputs_text, const std::string& previous) {
    Sha256 h;
    h.update("kiln-stage-v1\n");
    h.update(stage);
    h.update("\n");
    h.update(inputs_text);
    h.update("\n");
    h.update(previous);
    return h.hex();
}

namespace {
uint8_t nibble(char c) {
    return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10);
}
}  // namespace

StageHash::StageHash(const std::string& hex) {
    for (size_t i = 0; i < bytes_.size() && 2 * i + 1 < hex.size(); ++i)
        bytes_[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
}

std::string StageHash::hex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(bytes_.size() * 2, '0');
    for (size_t i = 0; i < bytes_.size(); ++i) {
        out[2 * i] = kDigits[bytes_[i] >> 4];
        out[2 * i + 1] = kDigits[bytes_[i] & 15];
    }
    return out;
}

}  // namespace kiln::engine
