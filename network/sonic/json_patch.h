// RFC 6902 JSON Patch between two JSON documents, and its applier.
//
// diff(from, to) is SONiC's rule, kiln's own: it walks objects member by
// member and emits the smallest patch at the finest level that exists in
// `from`: a member only `to` has is one "add" (whole subtree), a member only
// `from` has is one "remove", a changed scalar or array is one "replace".
// Members come out in key order, so a patch is deterministic. Arrays are
// replaced whole: CONFIG_DB's only arrays are leaf-lists, and SONiC treats
// them as one value (nlohmann's json::diff would patch them element-wise).
//
// Applying and JSON Pointers (RFC 6901) are nlohmann-json's
// (json::patch_inplace, json::json_pointer), one operation at a time on a
// copy: a failing operation leaves the input intact, and its error names the
// operation's index, op and path.
//
// Round trip: apply(from, diff(from, to)) == to for any two documents.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::network::sonic {

// "/" + escaped tokens joined by "/"; {} -> "" (the whole document).
std::string make_pointer(const std::vector<std::string>& tokens);
// "" -> {}; "/a~1b/c" -> {"a/b", "c"}. Errors: no leading '/', bad escapes.
Result<std::vector<std::string>> split_pointer(const std::string& pointer);

// The patch turning `from` into `to` (a JSON array of operations).
nlohmann::json json_diff(const nlohmann::json& from, const nlohmann::json& to);

// `patch` applied to `doc`. Errors: not an array, an unknown op, a missing
// member for remove/replace/move/copy, a failing test.
Result<nlohmann::json> json_patch_apply(const nlohmann::json& doc, const nlohmann::json& patch);

}  // namespace kiln::network::sonic
