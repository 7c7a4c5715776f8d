// One reference token escaped for a JSON Pointer (RFC 6901): '~' as "~0",
// '/' as "~1" ("a/b~c" -> "a~1b~0c"), by nlohmann-json's json_pointer, the
// one pointer implementation kiln uses. Header-only: the fuzzers build
// their sources by list.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

inline std::string json_pointer_escape(std::string_view token) {
    return (nlohmann::json::json_pointer() / std::string(token)).to_string().substr(1);
}

}  // namespace kiln
