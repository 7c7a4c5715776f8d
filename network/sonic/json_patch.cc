#include "network/sonic/json_patch.h"

#include <fmt/format.h>

namespace kiln::network::sonic {

namespace {

using nlohmann::json;

Error patch_error(size_t index, const std::string& op, const std::string& path, const std::string& why) {
    return make_error("network", "network.bad_patch",
                      fmt::format("patch operation {} ({} {}): {}", index, op, path, why));
}

void diff_into(const json& from, const json& to, std::vector<std::string>& at, json& out) {
    if (from.is_object() && to.is_object()) {
        // Both sides are sorted maps: one merge pass.
        for (auto it = from.begin(); it != from.end(); ++it) {
            at.push_back(it.key());
            auto other = to.find(it.key());
            if (other == to.end())
                out.push_back({{"op", "remove"}, {"path", make_pointer(at)}});
            else
                diff_into(*it, *other, at, out);
            at.pop_back();
        }
        for (auto it = to.begin(); it != to.end(); ++it) {
            if (from.contains(it.key())) continue;
            at.push_back(it.key());
            out.push_back({{"op", "add"}, {"path", make_pointer(at)}, {"value", *it}});
            at.pop_back();
        }
        return;
    }
    if (from != to) out.push_back({{"op", "replace"}, {"path", make_pointer(at)}, {"value", to}});
}

// nlohmann's message without its "[json.exception.kind.id] " prefix.
std::string reason(const json::exception& e) {
    std::string what = e.what();
    if (auto end = what.find("] "); what.rfind("[json.exception.", 0) == 0 && end != std::string::npos)
        what.erase(0, end + 2);
    return what;
}

}  // namespace

std::string make_pointer(const std::vector<std::string>& tokens) {
    json::json_pointer p;
    for (const auto& t : tokens) p /= t;
    return p.to_string();
}

Result<std::vector<std::string>> split_pointer(const std::string& pointer) {
    try {
        json::json_pointer p(pointer);
        std::vector<std::string> tokens;
        for (; !p.empty(); p.pop_back()) tokens.push_back(p.back());
        return std::vector<std::string>(tokens.rbegin(), tokens.rend());
    } catch (const json::exception& e) {
        return make_error("network", "network.bad_pointer", fmt::format("'{}': {}", pointer, reason(e)));
    }
}

json json_diff(const json& from, const json& to) {
    json out = json::array();
    std::vector<std::string> at;
    diff_into(from, to, at, out);
    return out;
}

Result<json> json_patch_apply(const json& doc, const json& patch) {
    if (!patch.is_array())
        return make_error("network", "network.bad_patch", "a JSON Patch must be an array of operations");
    json work = doc;
    for (size_t i = 0; i < patch.size(); ++i) {
        const json& op = patch[i];
        auto member = [&](const char* key) {
            return op.is_object() && op.contains(key) && op[key].is_string() ? op[key].get<std::string>()
                                                                             : std::string("?");
        };
        try {
            work.patch_inplace(json::array({op}));
        } catch (const json::exception& e) {
            return patch_error(i, member("op"), member("path"), reason(e));
        }
    }
    return work;
}

}  // namespace kiln::network::sonic
