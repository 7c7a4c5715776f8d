// SHA-256 as lowercase hex, for input hashes, artifact digests and keys.
#pragma once

#include <string>
#include <string_view>

#include "provisioner/core/result.h"

namespace kiln {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(std::string_view data);
    std::string hex();  // finishes; call once

private:
    void* ctx_;  // EVP_MD_CTX*
};

std::string sha256_hex(std::string_view data);
Result<std::string> sha256_file(const std::string& path);

}  // namespace kiln
