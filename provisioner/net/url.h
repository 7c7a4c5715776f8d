// Small URL helpers for the HTTP drivers: building request URLs from a base
// and a path, percent-encoding ids that travel in a path segment or a query
// (NVUE revision ids contain '/'), splitting a URL into its parts, and the
// form of a URL that is safe to print.
#pragma once

#include <string>
#include <string_view>

#include "provisioner/core/result.h"

namespace kiln::net {

// Percent-encodes everything but RFC 3986 unreserved characters
// (A-Z a-z 0-9 - . _ ~), so the result is one path segment or one query
// value whatever it held: "changeset/root/2024" -> "changeset%2Froot%2F2024".
std::string percent_encode(std::string_view text);

// Reverses percent_encode (and any other %XX escapes). '+' stays '+'.
// An error ("http.url") for a '%' not followed by two hex digits.
Result<std::string> percent_decode(std::string_view text);

// Joins a base URL and a path:
//  - `path` an absolute URL ("https://other/x"): `path` as it is;
//  - `path` starting with '/' (a Redfish @odata.id): the base's origin + path,
//    join("https://bmc/redfish/v1", "/redfish/v1/Systems/1")
//        == "https://bmc/redfish/v1/Systems/1";
//  - otherwise appended below the base with exactly one '/' between,
//    join("https://sw:8765/nvue_v1/", "revision") == "https://sw:8765/nvue_v1/revision".
// (Unlike RFC 3986 resolution, a base without a trailing '/' keeps its last
// segment: API roots are written both ways.)
std::string join_url(std::string_view base, std::string_view path);

struct UrlParts {
    std::string scheme;  // lowercase: "http", "https"
    std::string host;    // lowercase, IPv6 without brackets: "::1"
    int port = 0;        // explicit, or the scheme's default (80, 443; 0 if unknown)
    std::string target;  // path plus query, "/" when empty: "/nvue_v1/revision?rev=3"
};

// Splits "scheme://[user[:pass]@]host[:port][/path][?query][#fragment]".
// Userinfo and fragment are dropped. Errors: "http.url".
Result<UrlParts> split_url(std::string_view url);

// The URL fit for logs and error messages: no userinfo, no query, no
// fragment (query strings and userinfo are where URLs carry secrets).
// Anything unparsable comes back as "<invalid url>".
std::string url_for_log(std::string_view url);

}  // namespace kiln::net
