// One reference token escaped for a JSON Pointer (RFC 6901): '~' as "~0",
// '/' as "~1", in that order ("a/b~c" -> "a~1b~0c"). Header-only: the
// fuzzers build their sources by list.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

inline std::string json_pointer_escape(std::string_view token) {
    std::string out;
    out.reserve(token.size());
    for (char c : token) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

}  // namespace kiln
