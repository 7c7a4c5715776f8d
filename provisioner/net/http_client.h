// The HTTP transport every kiln driver uses (Redfish BMCs, Cumulus NVUE,
// Arista eAPI, handover webhooks). HttpClient is the interface drivers take;
// CurlHttpClient the real one on libcurl; tests give drivers a fake.
//
// An HTTP status is never an error: a 404 or a 503 comes back as a response.
// Errors are transport failures, domain "http":
//   http.connect    refused, unreachable, name not resolved   (transient)
//   http.timeout    connect or whole-request timeout          (transient)
//   http.transport  connection dropped, empty reply, send/recv failure (transient)
//   http.tls        certificate verification failed; or the handshake itself failed
//                   (transient then: a BMC restarting resets mid-handshake)
//   http.tls_pin    the leaf certificate does not match pinned_sha256 (or the pin is malformed)
//   http.too_large  the response passed max_response
//   http.url        malformed or unsupported URL
//   http.file       a multipart file_path cannot be read
//   http.internal   anything else (a bad method or header, a libcurl failure)
// Messages are one line, "GET https://host/path: connection refused", and
// never hold the password, the Authorization or X-Auth-Token values, URL
// userinfo or query strings.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::net {

struct TlsOptions {
    // false: no certificate checks at all. Only when a user asks for it.
    bool verify = true;
    // PEM file of trusted CAs instead of the system store ("" = system store).
    std::string ca_bundle;
    // Lowercase hex SHA-256 of the server's leaf certificate (DER), as
    // `openssl x509 -noout -fingerprint -sha256` prints it without colons
    // (colons and uppercase are accepted). When set, the chain is not checked
    // against CAs, nor the host name (BMCs ship self-signed certificates for
    // whatever name), but the leaf must match, whatever `verify` says.
    std::string pinned_sha256;
};

// One part of a multipart/form-data body (Redfish MultipartHttpPushUri:
// an "UpdateParameters" JSON part and an "UpdateFile" part).
struct MultipartPart {
    std::string name;
    std::string content_type;  // "" = none sent (libcurl's default for the kind of part)
    std::string data;          // the part's content, unless file_path is set
    std::string file_path;     // streamed from disk, never loaded whole
    std::string filename;      // "" = basename of file_path, or no filename for data parts
};

struct HttpRequest {
    std::string method = "GET";
    std::string url;
    // Sent as given. Content-Type is the caller's to set: none is added for
    // a body. "Accept-Encoding: identity" is added unless given here.
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    std::chrono::milliseconds timeout{30000};          // the whole request
    std::chrono::milliseconds connect_timeout{10000};  // TCP + TLS handshake
    TlsOptions tls;
    std::string basic_user;           // Basic auth when not empty
    std::string basic_password;       // never logged
    size_t max_response = 64u << 20;  // body bytes kept; more is http.too_large
    // When not empty, the body is multipart/form-data made of these parts
    // (and `body` must be empty). Leave Content-Type unset: libcurl writes
    // it with the boundary.
    std::vector<MultipartPart> multipart;
    // "" = direct. The http_proxy/https_proxy environment is ignored: BMC and
    // switch traffic going through an unnoticed proxy would carry credentials.
    std::string proxy;
};

struct HttpResponse {
    long status = 0;
    // In the order received, names as the server spelled them. Only the
    // final response's headers (not those of a 100 Continue).
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;

    // The first header of that name, case-insensitive; "" when absent.
    std::string header(const std::string& name) const;
};

class HttpClient {
public:
    virtual ~HttpClient() = default;
    virtual Result<HttpResponse> send(const HttpRequest& request) = 0;
};

// Thread-safe: any number of threads may call send() at once. Connections
// are kept between requests in one process-wide pool of idle connections
// (net/idle_pool.h), keyed by scheme, host, port, TLS settings and proxy:
// a node that parks between task polls and resumes on another thread still
// reuses its BMC's connection, and a connection opened unverified never
// serves a pinned or verified request. At most 8 idle per destination and
// idle_connection_budget() in all (core/idle_connection_budget.h; a run
// sizes it from the open-file limit), least recently used evicted first.
// A connection that failed or that the server closed is dropped; libcurl
// opens a new one. Redirects are not followed: a 3xx is a response.
class CurlHttpClient : public HttpClient {
public:
    CurlHttpClient();  // curl_global_init, once per process
    Result<HttpResponse> send(const HttpRequest& request) override;
};

// Idle connections the pool holds now, all destinations together.
size_t idle_connections();

}  // namespace kiln::net
