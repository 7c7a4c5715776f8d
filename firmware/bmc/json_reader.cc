#include "firmware/bmc/json_reader.h"

namespace kiln::bmc {

Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits, const std::string& what) {
    return parse_json_limited(text, what, limits, "bmc");
}

std::string json_kind(const nlohmann::json& value) {
    if (value.is_number()) return "number";
    return value.type_name();
}

std::string dump_json(const nlohmann::json& value) {
    return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kiln::bmc
