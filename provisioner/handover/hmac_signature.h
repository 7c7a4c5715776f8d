// The webhook's signature: HMAC-SHA256 over the exact body bytes, sent as
// "X-Kiln-Signature: sha256=<lowercase hex>" (the form GitHub's webhooks
// use, so receivers can reuse their verification code).
#pragma once

#include <string>
#include <string_view>

namespace kiln::handover {

inline constexpr const char* kSignatureHeader = "X-Kiln-Signature";

std::string hmac_sha256_hex(std::string_view key, std::string_view body);
// "sha256=" + hmac_sha256_hex(key, body)
std::string signature_header_value(std::string_view key, std::string_view body);

}  // namespace kiln::handover
