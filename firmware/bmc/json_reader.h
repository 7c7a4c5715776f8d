// JSON from files and from the wire is parsed with limits on size and
// nesting depth (bmcweb's rule): a hostile or broken body must not cost the
// emulator unbounded memory, and a parse error comes back as a value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::bmc {

struct JsonLimits {
    size_t max_bytes = 1u << 20;  // request bodies; mockup files pass a larger figure
    int max_depth = 32;
};

// Parses `text` into a JSON value. Errors (domain "bmc"): code
// "json_too_large", "json_too_deep" or "json_malformed"; `what` names the
// source (a file path or "request body") in the message.
Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits, const std::string& what);

// "string", "number", "boolean", "object", "array" or "null": the kinds a
// PATCH must keep (integers and floats are both numbers).
std::string json_kind(const nlohmann::json& value);

// Serialises for the wire; invalid UTF-8 is replaced, never thrown.
std::string dump_json(const nlohmann::json& value);

}  // namespace kiln::bmc
