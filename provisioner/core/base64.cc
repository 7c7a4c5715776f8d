#include "provisioner/core/base64.h"

#include <openssl/evp.h>

namespace kiln {

std::string base64_encode(const std::string& in) {
    std::string out(4 * ((in.size() + 2) / 3), '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
}

std::optional<std::string> base64_decode(const std::string& in) {
    if (in.empty()) return std::string();
    if (in.size() % 4 != 0) return std::nullopt;
    std::string out(in.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
    if (n < 0) return std::nullopt;
    size_t len = static_cast<size_t>(n);
    // EVP_DecodeBlock counts padding as zero bytes: drop them.
    if (in.back() == '=') --len;
    if (in[in.size() - 2] == '=') --len;
    out.resize(len);
    return out;
}

}  // namespace kiln
