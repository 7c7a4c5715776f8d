#include "provisioner/journal/store_url.h"

#include <algorithm>

namespace kiln::journal {

namespace {

// Where the user info of a URI ends ('@' before the host), or npos.
size_t userinfo_end(const std::string& url, size_t* start) {
    const auto scheme = url.find("://");
    if (scheme == std::string::npos) return std::string::npos;
    *start = scheme + 3;
    const auto authority_end = url.find_first_of("/?", *start);
    const auto at = url.rfind('@', authority_end == std::string::npos ? std::string::npos : authority_end);
    if (at == std::string::npos || at < *start) return std::string::npos;
    return at;
}

}  // namespace

bool is_postgres_url(const std::string& url) {
    return url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
}

std::string redact_store_url(const std::string& url) {
    std::string out = url;
    size_t start = 0;
    if (auto at = userinfo_end(out, &start); at != std::string::npos) {
        if (auto colon = out.find(':', start); colon != std::string::npos && colon < at)
            out.replace(colon + 1, at - colon - 1, "***");
    }
    // password=... in the query string.
    const auto q = out.find('?');
    if (q == std::string::npos) return out;
    for (size_t i = q + 1; i < out.size();) {
        const size_t end = std::min(out.find('&', i), out.size());
        if (out.compare(i, 9, "password=") == 0 && end > i + 9) {
            out.replace(i + 9, end - i - 9, "***");
            i += 13;
        } else {
            i = end + 1;
        }
    }
    return out;
}

Status check_store_url(const std::string& url) {
    if (!is_postgres_url(url))
        return make_error(
            "journal", "store.url",
            "expected a store URL postgresql://[user@]host[:port]/database, found '" + redact_store_url(url) + "'");
    if (redact_store_url(url) != url)
        return make_error("journal", "store.password_in_url",
                          "the store URL " + redact_store_url(url) +
                              " carries a password; remove it and give password = \"env:NAME\" or \"file:PATH\" "
                              "([store] in the fleet, or --store-password)");
    return ok_status();
}

}  // namespace kiln::journal
