// JSON that kiln reads from the wire or from a tool (a BMC's reply, a
// switch's, `ip -j`, `qemu-img info`, the guest agent, kiln-smoke's report,
// a request to kiln-bmc): parsed under limits on its size, nesting depth and
// number of values, so a hostile or broken document costs bounded memory and
// time, and every failure comes back as an error value naming its source,
// never as an exception. Messages name the byte, never quote the text (it
// may hold anything, secrets included).
//
// Errors: "<domain>.json", the message saying which limit or what is wrong
// (domain: the caller's, e.g. "redfish", "bmc", "network").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln {

struct JsonLimits {
    size_t max_bytes = 16u << 20;
    int max_depth = 64;
    // Values of every kind (scalars, objects, arrays): what the parsed tree
    // costs in nodes. 16 MiB of "[0,0,...]" would be 8 million.
    size_t max_values = 2'000'000;
};

Result<nlohmann::json> parse_json_limited(std::string_view text, const std::string& what, const JsonLimits& limits,
                                          const std::string& domain);

}  // namespace kiln
