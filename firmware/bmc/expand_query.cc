#include "firmware/bmc/expand_query.h"

#include <algorithm>
#include <cctype>

namespace kiln::bmc {

using nlohmann::json;

namespace {

bool offered(const json& features, const char* key) {
    return features.is_object() && features.contains(key) && features[key].is_boolean() && features[key].get<bool>();
}

ExpandRefusal malformed(const std::string& value) {
    return {400, messages::query_parameter_value_format_error(value, "$expand")};
}

bool is_reference(const json& v) {
    return v.is_object() && v.size() == 1 && v.contains("@odata.id") && v["@odata.id"].is_string();
}

json expand_in(const json& v, const ExpandRequest& req, int levels, bool in_links, const ResourceFetch& fetch) {
    if (is_reference(v)) {
        const bool wanted = req.kind == '*' || (req.kind == '.' && !in_links) || (req.kind == '~' && in_links);
        if (!wanted) return v;
        auto target = fetch(v["@odata.id"].get<std::string>());
        if (!target) return v;
        if (levels <= 1) return *target;
        return expand_in(*target, req, levels - 1, false, fetch);
    }
    if (v.is_array()) {
        json out = json::array();
        for (const auto& e : v) out.push_back(expand_in(e, req, levels, in_links, fetch));
        return out;
    }
    if (v.is_object()) {
        json out = json::object();
        for (auto it = v.begin(); it != v.end(); ++it)
            out[it.key()] = expand_in(it.value(), req, levels, in_links || it.key() == "Links", fetch);
        return out;
    }
    return v;
}

}  // namespace

std::variant<ExpandRequest, ExpandRefusal> parse_expand(const std::string& value, const json& service_root) {
    const json* features = nullptr;
    if (service_root.is_object() && service_root.contains("ProtocolFeaturesSupported") &&
        service_root["ProtocolFeaturesSupported"].is_object() &&
        service_root["ProtocolFeaturesSupported"].contains("ExpandQuery"))
        features = &service_root["ProtocolFeaturesSupported"]["ExpandQuery"];
    if (!features || !features->is_object()) return ExpandRefusal{501, messages::query_not_supported()};

    ExpandRequest req;
    if (value.empty()) return malformed(value);
    req.kind = value[0];
    const char* needs = req.kind == '*'   ? "ExpandAll"
                        : req.kind == '.' ? "NoLinks"
                        : req.kind == '~' ? "Links"
                                          : nullptr;
    if (!needs) return malformed(value);
    if (!offered(*features, needs)) return ExpandRefusal{501, messages::query_not_supported()};
    std::string rest = value.substr(1);
    if (rest.empty()) return req;
    // "($levels=n)"
    const std::string head = "($levels=";
    if (rest.size() <= head.size() + 1 || rest.compare(0, head.size(), head) != 0 || rest.back() != ')')
        return malformed(value);
    const std::string digits = rest.substr(head.size(), rest.size() - head.size() - 1);
    if (digits.empty() || digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        return malformed(value);
    if (!offered(*features, "Levels")) return ExpandRefusal{501, messages::query_not_supported()};
    req.levels = std::stoi(digits);
    int max_levels = 1;
    if (features->contains("MaxLevels") && (*features)["MaxLevels"].is_number_integer())
        max_levels = (*features)["MaxLevels"].get<int>();
    if (req.levels < 1 || req.levels > max_levels)
        return ExpandRefusal{
            400, messages::query_parameter_out_of_range(digits, "$levels", "1 to " + std::to_string(max_levels))};
    return req;
}

json expand(const json& body, const ExpandRequest& request, const ResourceFetch& fetch) {
    if (!body.is_object()) return body;
    json out = json::object();
    // The resource's own properties; its own @odata.id is not a reference.
    for (auto it = body.begin(); it != body.end(); ++it)
        out[it.key()] = expand_in(it.value(), request, request.levels, it.key() == "Links", fetch);
    return out;
}

}  // namespace kiln::bmc
