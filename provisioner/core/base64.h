// Base64 (RFC 4648), the one codec of the project: decoding what the QEMU
// guest agent hands back (guest-exec output, guest-file-read contents) and
// Basic credentials a server receives; encoding Basic credentials.
#pragma once

#include <optional>
#include <string>

namespace kiln {

std::string base64_encode(const std::string& in);

// nullopt when `in` is not valid base64 (padded, a multiple of 4 long).
std::optional<std::string> base64_decode(const std::string& in);

}  // namespace kiln
