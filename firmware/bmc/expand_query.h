// The $expand query (DSP0266 "Query parameters"), as a real BMC serves it:
// only when the service root's ProtocolFeaturesSupported.ExpandQuery offers
// it, and only in the forms offered there ('*' needs ExpandAll, '.' NoLinks,
// '~' Links, "($levels=n)" Levels and n <= MaxLevels). Expanding replaces
// each reference ({"@odata.id": ...} and nothing else) in scope with the
// resource it names, to the given depth; Members of a collection are
// references outside Links, so "$expand=.($levels=1)" returns a collection
// with its members inline, which is what clients use it for.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "firmware/bmc/redfish_error.h"

namespace kiln::bmc {

struct ExpandRequest {
    char kind = '.';  // '*' every reference, '.' those outside Links, '~' those in Links
    int levels = 1;
};

// A refusal: the HTTP status (501 not offered, 400 malformed or out of
// range) and the Base registry message.
struct ExpandRefusal {
    int status;
    RedfishMessage message;
};

// Parses `value` (what follows "$expand=") against what `service_root`
// advertises. An ExpandRefusal when the service does not offer that form.
std::variant<ExpandRequest, ExpandRefusal> parse_expand(const std::string& value, const nlohmann::json& service_root);

// The resource `uri` names as a GET would return it, or nullopt (left as a
// reference, as services do for what they cannot expand).
using ResourceFetch = std::function<std::optional<nlohmann::json>(const std::string& uri)>;

// `body` with the references in the request's scope replaced, `levels` deep.
nlohmann::json expand(const nlohmann::json& body, const ExpandRequest& request, const ResourceFetch& fetch);

}  // namespace kiln::bmc
