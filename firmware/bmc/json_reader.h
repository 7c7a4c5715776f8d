// JSON from files and from the wire is parsed with limits on size, nesting
// depth and values (bmcweb's rule): a hostile or broken body must not cost
// the emulator unbounded memory, and a parse error comes back as a value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "provisioner/core/json_limits.h"
#include "provisioner/core/result.h"

namespace kiln::bmc {

// Parsed with kiln::parse_json_limited (provisioner/core/json_limits.h):
// error "bmc.json", the message naming `what` (a file path or "request
// body") and the limit or fault. Request bodies pass 1 MiB and 32 levels,
// mockup files more.
Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits, const std::string& what);

// "string", "number", "boolean", "object", "array" or "null": the kinds a
// PATCH must keep (integers and floats are both numbers).
std::string json_kind(const nlohmann::json& value);

// Serialises for the wire; invalid UTF-8 is replaced, never thrown.
std::string dump_json(const nlohmann::json& value);

}  // namespace kiln::bmc
