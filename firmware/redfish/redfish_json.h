// JSON that came from a BMC: parsed under size and depth limits, then read
// only through typed accessors, so a missing link or a wrong type becomes an
// error that names the resource and the field ("GET /redfish/v1/Systems/1:
// /Bios/@odata.id: missing") instead of an exception or a crash.
//
// Errors, domain "redfish":
//   redfish.json      not JSON, a number out of range, or past the size or
//                     nesting limit
//   redfish.missing   a required field is absent (or null)
//   redfish.type      a field holds another JSON type than the one expected
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/json_limits.h"
#include "provisioner/core/result.h"

namespace kiln::redfish {

// Parsed with kiln::parse_json_limited (provisioner/core/json_limits.h):
// redfish.json on any failure. `what` names the source in errors
// ("GET /redfish/v1/Systems").
Result<nlohmann::json> parse_json(std::string_view text, const std::string& what, const JsonLimits& limits = {});

// A read-only view of one value inside a resource, remembering where it is
// (resource URI + JSON pointer) for error messages. Views borrow the JSON:
// keep the owning document alive while they are used.
class JsonView {
public:
    JsonView(const nlohmann::json& value, std::string resource, std::string pointer = "")
        : v_(&value), resource_(std::move(resource)), pointer_(std::move(pointer)) {}

    const nlohmann::json& raw() const { return *v_; }
    const std::string& resource() const { return resource_; }
    std::string where() const { return pointer_.empty() ? std::string("/") : pointer_; }

    // Required member of an object (null counts as absent).
    Result<JsonView> at(std::string_view key) const;
    // Optional member: nullopt when absent or null; an error only when this
    // view is not an object.
    std::optional<JsonView> find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key).has_value(); }

    Result<std::string> str() const;
    Result<bool> boolean() const;
    Result<long long> integer() const;
    Result<std::vector<JsonView>> array() const;
    // Members of an object in key order.
    Result<std::vector<std::pair<std::string, JsonView>>> object() const;

    // Shorthands: a required string member, an optional one ("" when absent;
    // an error when present with another type), a link ({"@odata.id": "..."}).
    Result<std::string> str(std::string_view key) const;
    Result<std::string> opt_str(std::string_view key) const;
    Result<std::string> link(std::string_view key) const;
    // "" when the link is absent; an error when present but malformed.
    Result<std::string> opt_link(std::string_view key) const;
    // The @odata.id of every entry of a collection's "Members".
    Result<std::vector<std::string>> members() const;

    Error missing(std::string_view key) const;
    Error wrong_type(const std::string& expected) const;

private:
    std::string child_pointer(std::string_view key) const;

    const nlohmann::json* v_;
    std::string resource_;
    std::string pointer_;
};

const char* json_type_name(const nlohmann::json& value);

// Text from a BMC (headers, messages) made fit for a one-line message and
// for JSON output: invalid UTF-8 and control bytes become '?'. nlohmann's
// dump() throws on invalid UTF-8, so nothing unchecked may reach the journal.
std::string valid_utf8(std::string_view text);
// Called inside a catch block: the exception in flight in a few words, fit
// for a message (nlohmann's own text is not quoted: it may quote the reply).
std::string current_exception_summary();
// At most `max_bytes` bytes, cut between characters, with "..." when cut.
std::string clip_utf8(std::string_view text, size_t max_bytes);

}  // namespace kiln::redfish
