#include "provisioner/handover/hmac_signature.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace kiln::handover {

std::string hmac_sha256_hex(std::string_view key, std::string_view body) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(body.data()),
         body.size(), mac, &len);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
        out += hex[mac[i] >> 4];
        out += hex[mac[i] & 15];
    }
    return out;
}

std::string signature_header_value(std::string_view key, std::string_view body) {
    return "sha256=" + hmac_sha256_hex(key, body);
}

}  // namespace kiln::handover
