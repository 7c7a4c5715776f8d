// Base64 (RFC 4648) decoding, for what the QEMU guest agent hands back
// (guest-exec output, guest-file-read contents).
#pragma once

#include <optional>
#include <string>

namespace kiln {

// nullopt when `in` is not valid base64.
std::optional<std::string> base64_decode(const std::string& in);

}  // namespace kiln
