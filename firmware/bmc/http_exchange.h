// One HTTP request and its answer, free of any server library: BmcState
// handles these, bmc_server.cc converts to and from libmicrohttpd, and the
// in-process tests build them by hand.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::bmc {

// Header names compare case-insensitively (RFC 9110).
struct HeaderNameLess {
    bool operator()(const std::string& a, const std::string& b) const {
        const size_t n = a.size() < b.size() ? a.size() : b.size();
        for (size_t i = 0; i < n; ++i) {
            char x = a[i], y = b[i];
            if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
            if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
            if (x != y) return x < y;
        }
        return a.size() < b.size();
    }
};

using HeaderMap = std::map<std::string, std::string, HeaderNameLess>;

// A multipart/form-data body the transport already took apart, the file
// spooled to disk (MultipartHttpPushUri). The receiver deletes file_path.
struct MultipartBody {
    bool has_parameters = false;
    std::string parameters;  // the UpdateParameters part
    std::string file_path;   // the UpdateFile part; "" when there was none
    std::string file_name;
    std::string file_sha256;
    size_t file_size = 0;
    std::string file_head;  // its first bytes (the image header)
};

struct BmcRequest {
    std::string method;  // "GET", "PATCH", ...
    std::string path;    // URL path, query removed, already percent-decoded
    // Query parameters, decoded ("$expand" -> ".($levels=1)"); only $expand
    // is acted on (expand_query.h), the others are ignored as before.
    std::map<std::string, std::string> query;
    HeaderMap headers;
    std::string body;
    std::optional<MultipartBody> multipart;

    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

struct BmcResponse {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type and OData-Version
    std::string content_type = "application/json; charset=utf-8";
    std::string body;
    bool drop_connection = false;  // fault: close the connection, answer nothing

    std::string header(const std::string& name) const {
        HeaderNameLess less;
        for (const auto& [k, v] : headers) {
            if (!less(k, name) && !less(name, k)) return v;
        }
        return {};
    }
};

}  // namespace kiln::bmc
