#include "firmware/bmc/json_reader.h"

namespace kiln::bmc {

Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits, const std::string& what) {
    if (text.size() > limits.max_bytes) {
        return make_error("bmc", "json_too_large",
                          what + " is " + std::to_string(text.size()) + " bytes, over the limit of " +
                              std::to_string(limits.max_bytes));
    }
    bool too_deep = false;
    // nlohmann's parser is iterative, so depth only costs memory; the
    // callback discards what lies too deep and we refuse the whole value.
    auto on_event = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > limits.max_depth) {
            too_deep = true;
            return false;
        }
        return true;
    };
    nlohmann::json value;
    try {
        value = nlohmann::json::parse(text.begin(), text.end(), on_event);
    } catch (const nlohmann::json::exception& e) {
        // parse_error for syntax, out_of_range for a number that overflows
        // ("1e400"): both are the client's malformed JSON, not our fault.
        return make_error("bmc", "json_malformed", what + " is not valid JSON: " + e.what());
    }
    if (too_deep) {
        return make_error("bmc", "json_too_deep",
                          what + " nests deeper than " + std::to_string(limits.max_depth) + " levels");
    }
    return value;
}

std::string json_kind(const nlohmann::json& value) {
    if (value.is_number()) return "number";
    return value.type_name();
}

std::string dump_json(const nlohmann::json& value) {
    return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kiln::bmc
