#include "firmware/redfish/redfish_json.h"

#include <climits>
#include <new>

#include <fmt/format.h>

#include "provisioner/core/json_pointer.h"

namespace kiln::redfish {

using nlohmann::json;

namespace {

// JSON pointer escaping (RFC 6901) for keys like "#Bios.ResetBios".
std::string escape_key(std::string_view key) {
    return json_pointer_escape(key);
}

}  // namespace

const char* json_type_name(const json& value) {
    switch (value.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::object:
            return "an object";
        case json::value_t::array:
            return "an array";
        case json::value_t::string:
            return "a string";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
            return "an integer";
        case json::value_t::number_float:
            return "a number";
        default:
            return "an unknown value";
    }
}

Result<json> parse_json(std::string_view text, const std::string& what, const JsonLimits& limits) {
    return parse_json_limited(text, what, limits, "redfish");
}

// Length of the well-formed UTF-8 character at text[i] (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), 0 when it is not one.
static size_t utf8_char(std::string_view text, size_t i) {
    auto at = [&](size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0x100u; };
    auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
    const unsigned c = at(0);
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c >= 0xE1 && c <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
}

std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        size_t len = utf8_char(text, i);
        const auto c = static_cast<unsigned char>(text[i]);
        if (len == 1 && (c < 0x20 || c == 0x7F) && c != '\t') len = 0;  // control bytes break one-line messages
        if (len == 0) {
            out += '?';
            ++i;
        } else {
            out.append(text.substr(i, len));
            i += len;
        }
    }
    return out;
}

std::string current_exception_summary() {
    try {
        throw;
    } catch (const json::exception& e) {
        return fmt::format("JSON error {}", e.id);
    } catch (const std::bad_alloc&) {
        return "out of memory";
    } catch (const std::exception& e) {
        return clip_utf8(valid_utf8(e.what()), 120);
    } catch (...) {
        return "unknown exception";
    }
}

std::string clip_utf8(std::string_view text, size_t max_bytes) {
    if (text.size() <= max_bytes) return std::string(text);
    size_t end = max_bytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a character
    return std::string(text.substr(0, end)) + "...";
}

std::string JsonView::child_pointer(std::string_view key) const {
    return pointer_ + "/" + escape_key(key);
}

Error JsonView::missing(std::string_view key) const {
    return make_error("redfish", "redfish.missing", fmt::format("{}: {}: missing", resource_, child_pointer(key)));
}

Error JsonView::wrong_type(const std::string& expected) const {
    return make_error("redfish", "redfish.type",
                      fmt::format("{}: {}: expected {}, got {}", resource_, where(), expected, json_type_name(*v_)));
}

Result<JsonView> JsonView::at(std::string_view key) const {
    if (!v_->is_object()) return wrong_type("an object");
    auto it = v_->find(key);
    if (it == v_->end() || it->is_null()) return missing(key);
    return JsonView(*it, resource_, child_pointer(key));
}

std::optional<JsonView> JsonView::find(std::string_view key) const {
    if (!v_->is_object()) return std::nullopt;
    auto it = v_->find(key);
    if (it == v_->end() || it->is_null()) return std::nullopt;
    return JsonView(*it, resource_, child_pointer(key));
}

Result<std::string> JsonView::str() const {
    if (!v_->is_string()) return wrong_type("a string");
    return v_->get<std::string>();
}

Result<bool> JsonView::boolean() const {
    if (!v_->is_boolean()) return wrong_type("a boolean");
    return v_->get<bool>();
}

Result<long long> JsonView::integer() const {
    if (!v_->is_number_integer() && !v_->is_number_unsigned()) return wrong_type("an integer");
    if (v_->is_number_unsigned() && v_->get<unsigned long long>() > static_cast<unsigned long long>(LLONG_MAX))
        return make_error("redfish", "redfish.type", fmt::format("{}: {}: integer out of range", resource_, where()));
    return v_->get<long long>();
}

Result<std::vector<JsonView>> JsonView::array() const {
    if (!v_->is_array()) return wrong_type("an array");
    std::vector<JsonView> out;
    out.reserve(v_->size());
    for (size_t i = 0; i < v_->size(); ++i) out.emplace_back((*v_)[i], resource_, pointer_ + "/" + std::to_string(i));
    return out;
}

Result<std::vector<std::pair<std::string, JsonView>>> JsonView::object() const {
    if (!v_->is_object()) return wrong_type("an object");
    std::vector<std::pair<std::string, JsonView>> out;
    for (auto it = v_->begin(); it != v_->end(); ++it)
        out.emplace_back(it.key(), JsonView(it.value(), resource_, child_pointer(it.key())));
    return out;
}

Result<std::string> JsonView::str(std::string_view key) const {
    auto v = at(key);
    if (!v) return v.error();
    return v->str();
}

Result<std::string> JsonView::opt_str(std::string_view key) const {
    if (!v_->is_object()) return wrong_type("an object");
    auto v = find(key);
    if (!v) return std::string();
    return v->str();
}

Result<std::string> JsonView::link(std::string_view key) const {
    auto v = at(key);
    if (!v) return v.error();
    auto id = v->str("@odata.id");
    if (!id) return id.error();
    if (id->empty() || (*id)[0] != '/')
        return make_error("redfish", "redfish.type",
                          fmt::format("{}: {}/@odata.id: not a service-relative path", resource_, v->where()));
    return id;
}

Result<std::string> JsonView::opt_link(std::string_view key) const {
    if (!v_->is_object()) return wrong_type("an object");
    if (!has(key)) return std::string();
    return link(key);
}

Result<std::vector<std::string>> JsonView::members() const {
    auto m = at("Members");
    if (!m) return m.error();
    auto items = m->array();
    if (!items) return items.error();
    std::vector<std::string> out;
    for (const auto& item : *items) {
        auto id = item.str("@odata.id");
        if (!id) return id.error();
        if (id->empty() || (*id)[0] != '/')
            return make_error("redfish", "redfish.type",
                              fmt::format("{}: {}/@odata.id: not a service-relative path", resource_, item.where()));
        out.push_back(*id);
    }
    return out;
}

}  // namespace kiln::redfish
