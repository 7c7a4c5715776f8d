#include "network/sonic/json_patch.h"

#include <fmt/format.h>

#include "provisioner/core/json_pointer.h"

namespace kiln::network::sonic {

namespace {

using nlohmann::json;

Error patch_error(size_t index, const std::string& op, const std::string& path, const std::string& why) {
    return make_error("network", "bad-patch", fmt::format("patch operation {} ({} {}): {}", index, op, path, why));
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

// An array index token: "0" or digits without a leading zero; "-" when allowed.
Result<size_t> array_index(const json& arr, const std::string& token, bool allow_end) {
    if (token == "-" && allow_end) return arr.size();
    const bool digits = !token.empty() && token.size() <= 18 &&
                        token.find_first_not_of("0123456789") == std::string::npos && (token == "0" || token[0] != '0');
    if (!digits) return make_error("network", "bad-patch", fmt::format("'{}' is not an array index", token));
    const size_t i = std::stoull(token);
    if (i > arr.size() || (i == arr.size() && !allow_end))
        return make_error("network", "bad-patch", fmt::format("index {} is out of range (size {})", i, arr.size()));
    return i;
}

// The value at `tokens` (nullptr when absent or not reachable).
json* find(json& doc, const std::vector<std::string>& tokens) {
    json* cur = &doc;
    for (const auto& t : tokens) {
        if (cur->is_object()) {
            auto it = cur->find(t);
            if (it == cur->end()) return nullptr;
            cur = &*it;
        } else if (cur->is_array()) {
            auto i = array_index(*cur, t, false);
            if (!i) return nullptr;
            cur = &(*cur)[*i];
        } else {
            return nullptr;
        }
    }
    return cur;
}

// The container holding the last token; an error when it does not exist.
Result<json*> parent_of(json& doc, const std::vector<std::string>& tokens) {
    std::vector<std::string> up(tokens.begin(), tokens.end() - 1);
    json* p = find(doc, up);
    if (!p) return make_error("network", "bad-patch", fmt::format("{} does not exist", make_pointer(up)));
    if (!p->is_object() && !p->is_array())
        return make_error("network", "bad-patch",
                          fmt::format("{} is neither an object nor an array", make_pointer(up)));
    return p;
}

Status add_at(json& doc, const std::vector<std::string>& tokens, json value) {
    if (tokens.empty()) {
        doc = std::move(value);
        return ok_status();
    }
    auto parent = parent_of(doc, tokens);
    if (!parent) return parent.error();
    json& p = **parent;
    if (p.is_object()) {
        p[tokens.back()] = std::move(value);  // add on an existing member replaces it (§4.1)
        return ok_status();
    }
    auto i = array_index(p, tokens.back(), true);
    if (!i) return i.error();
    p.insert(p.begin() + static_cast<std::ptrdiff_t>(*i), std::move(value));
    return ok_status();
}

Result<json> remove_at(json& doc, const std::vector<std::string>& tokens) {
    if (tokens.empty()) return make_error("network", "bad-patch", "cannot remove the whole document");
    auto parent = parent_of(doc, tokens);
    if (!parent) return parent.error();
    json& p = **parent;
    if (p.is_object()) {
        auto it = p.find(tokens.back());
        if (it == p.end())
            return make_error("network", "bad-patch", fmt::format("{} does not exist", make_pointer(tokens)));
        json old = std::move(*it);
        p.erase(it);
        return old;
    }
    auto i = array_index(p, tokens.back(), false);
    if (!i) return i.error();
    json old = std::move(p[*i]);
    p.erase(p.begin() + static_cast<std::ptrdiff_t>(*i));
    return old;
}

bool is_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

std::string pointer_escape(const std::string& token) {
    return json_pointer_escape(token);
}

Result<std::string> pointer_unescape(const std::string& token) {
    std::string out;
    out.reserve(token.size());
    for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] != '~') {
            out += token[i];
            continue;
        }
        if (i + 1 >= token.size() || (token[i + 1] != '0' && token[i + 1] != '1'))
            return make_error("network", "bad-pointer", fmt::format("'{}': '~' must be followed by 0 or 1", token));
        out += token[i + 1] == '0' ? '~' : '/';
        ++i;
    }
    return out;
}

std::string make_pointer(const std::vector<std::string>& tokens) {
    std::string out;
    for (const auto& t : tokens) out += "/" + pointer_escape(t);
    return out;
}

Result<std::vector<std::string>> split_pointer(const std::string& pointer) {
    std::vector<std::string> tokens;
    if (pointer.empty()) return tokens;
    if (pointer[0] != '/')
        return make_error("network", "bad-pointer", fmt::format("'{}' must be empty or start with '/'", pointer));
    size_t start = 1;
    while (true) {
        const size_t end = pointer.find('/', start);
        auto t = pointer_unescape(pointer.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (!t) return t.error();
        tokens.push_back(std::move(*t));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return tokens;
}

json json_diff(const json& from, const json& to) {
    json out = json::array();
    std::vector<std::string> at;
    diff_into(from, to, at, out);
    return out;
}

Result<json> json_patch_apply(const json& doc, const json& patch) {
    if (!patch.is_array()) return make_error("network", "bad-patch", "a JSON Patch must be an array of operations");
    json work = doc;
    for (size_t i = 0; i < patch.size(); ++i) {
        const json& op = patch[i];
        if (!op.is_object() || !op.contains("op") || !op["op"].is_string() || !op.contains("path") ||
            !op["path"].is_string())
            return patch_error(i, "?", "?", "needs string members \"op\" and \"path\"");
        const std::string name = op["op"].get<std::string>();
        const std::string path = op["path"].get<std::string>();
        auto tokens = split_pointer(path);
        if (!tokens) return patch_error(i, name, path, tokens.error().message);
        auto fail = [&](const Error& e) { return patch_error(i, name, path, e.message); };

        if (name == "add" || name == "replace" || name == "test") {
            if (!op.contains("value")) return patch_error(i, name, path, "needs a \"value\"");
            const json& value = op["value"];
            if (name == "add") {
                if (Status s = add_at(work, *tokens, value); !s) return fail(s.error());
                continue;
            }
            json* target = find(work, *tokens);
            if (!target) return patch_error(i, name, path, "the target does not exist");
            if (name == "replace") {
                *target = value;
            } else if (*target != value) {
                return patch_error(i, name, path, fmt::format("value is {}, not {}", target->dump(), value.dump()));
            }
            continue;
        }
        if (name == "remove") {
            if (auto r = remove_at(work, *tokens); !r) return fail(r.error());
            continue;
        }
        if (name == "move" || name == "copy") {
            if (!op.contains("from") || !op["from"].is_string())
                return patch_error(i, name, path, "needs a string \"from\"");
            auto from = split_pointer(op["from"].get<std::string>());
            if (!from) return fail(from.error());
            if (name == "move" && is_prefix(*from, *tokens))
                return patch_error(i, name, path, "cannot move a value into itself");
            json value;
            if (name == "move") {
                if (*from == *tokens) continue;
                auto r = remove_at(work, *from);
                if (!r) return fail(r.error());
                value = std::move(*r);
            } else {
                json* src = find(work, *from);
                if (!src)
                    return patch_error(i, name, path, fmt::format("{} does not exist", op["from"].get<std::string>()));
                value = *src;
            }
            if (Status s = add_at(work, *tokens, std::move(value)); !s) return fail(s.error());
            continue;
        }
        return patch_error(i, name, path, "unknown op (expected add, remove, replace, move, copy or test)");
    }
    return work;
}

}  // namespace kiln::network::sonic
