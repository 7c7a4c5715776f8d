#include "provisioner/net/http_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "provisioner/core/base64.h"
#include "provisioner/core/idle_connection_budget.h"
#include "provisioner/net/idle_pool.h"
#include "provisioner/net/url.h"

namespace kiln::net {

namespace {

// ---- RAII for libcurl handles ------------------------------------------------

struct EasyDeleter {
    void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
using CurlEasy = std::unique_ptr<CURL, EasyDeleter>;

struct SlistDeleter {
    void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// curl_slist_append returns the (possibly new) head; keep ownership in one place.
class HeaderList {
public:
    bool append(const std::string& line) {
        curl_slist* head = curl_slist_append(list_.get(), line.c_str());
        if (!head) return false;
        static_cast<void>(list_.release());  // the list is head's now (the same list, one longer)
        list_.reset(head);
        return true;
    }
    curl_slist* get() const { return list_.get(); }

private:
    std::unique_ptr<curl_slist, SlistDeleter> list_;
};

struct MimeDeleter {
    void operator()(curl_mime* m) const { curl_mime_free(m); }
};
using CurlMime = std::unique_ptr<curl_mime, MimeDeleter>;

// ---- small string helpers ----------------------------------------------------

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool iequals(const std::string& a, const std::string& b) {
    return a.size() == b.size() && lower(a) == lower(b);
}

// RFC 9110 token characters: what a method or a header name may hold.
bool is_token(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
        auto c = static_cast<unsigned char>(ch);
        return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", ch) != nullptr;
    });
}

std::string trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return std::string(s);
}

std::string to_hex(const unsigned char* data, size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    out.reserve(n * 2);
    for (size_t i = 0; i < n; ++i) {
        out += digits[data[i] >> 4];
        out += digits[data[i] & 0xF];
    }
    return out;
}

// "AB:CD:..." or "abcd..." -> "abcd...", or "" when not 64 hex digits.
std::string normalize_pin(const std::string& pin) {
    std::string out;
    for (char c : pin) {
        if (c == ':') continue;
        if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out.size() == 64 ? out : "";
}

// ---- certificate pinning -----------------------------------------------------

// Lives as long as the easy handle whose connections it checks (see
// PooledHandle), so a late handshake on a kept connection never sees a
// dangling pointer.
struct PinState {
    std::string expected;  // normalized
    std::string seen;      // the last leaf fingerprint the handshake saw
    bool mismatch = false;
};

// Replaces OpenSSL's chain verification for pinned connections: the leaf's
// DER SHA-256 must equal the pin; CAs and names do not matter.
int pin_verify(X509_STORE_CTX* store, void* arg) {
    auto* pin = static_cast<PinState*>(arg);
    X509* leaf = X509_STORE_CTX_get0_cert(store);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (leaf == nullptr || X509_digest(leaf, EVP_sha256(), md, &len) != 1) {
        pin->seen = "(no certificate)";
        pin->mismatch = true;
        X509_STORE_CTX_set_error(store, X509_V_ERR_UNSPECIFIED);
        return 0;
    }
    pin->seen = to_hex(md, len);
    if (pin->seen == pin->expected) return 1;
    pin->mismatch = true;
    X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
    return 0;
}

// libcurl calls this with each new connection's SSL_CTX before the handshake.
// libcurl was told verifypeer=0 (so it skips its own CA checks); turning
// SSL_VERIFY_PEER back on here makes a failed pin abort the handshake, before
// any request byte (or credential) is sent.
CURLcode install_pin(CURL*, void* ssl_ctx, void* arg) {
    auto* ctx = static_cast<SSL_CTX*>(ssl_ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_cert_verify_callback(ctx, pin_verify, arg);
    return CURLE_OK;
}

bool is_ip_literal(const std::string& host) {
    unsigned char buf[sizeof(in6_addr)];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// ---- idle connection pool ------------------------------------------------------

// An easy handle keeps its connection and TLS session across
// curl_easy_reset. Each is told to keep at most one connection and only
// ever serves one destination under one set of TLS settings (its pool key),
// so a pooled handle is one idle connection (kFilesPerIdleConnection open
// files), counted against the process's idle-connection budget
// (core/idle_connection_budget.h), and never reused under settings it was
// not verified with.
struct PooledHandle {
    CurlEasy easy;
    std::unique_ptr<PinState> pin;  // set for pinned keys; lives as long as the handle's connections
};
using HandlePtr = std::unique_ptr<PooledHandle>;

// Per destination: a BMC is talked to by one node at a time; a switch by a
// few at once.
constexpr size_t kIdlePerDestination = 8;

// Never destroyed: a detached thread may still put a handle back after
// main returns; the OS closes what is left at exit.
IdlePool<HandlePtr>& idle_handles() {
    static auto* pool = new IdlePool<HandlePtr>(kIdlePerDestination);
    return *pool;
}

// Back to the pool for the next request to `key`, within the budget read now.
void put_back(const std::string& key, HandlePtr handle) {
    // Evicted handles close their connections here, outside the pool's lock.
    auto dropped = idle_handles().put(key, std::move(handle), static_cast<size_t>(idle_connection_budget()));
    dropped.clear();
}

// ---- response sinks ------------------------------------------------------------

struct BodySink {
    std::string* body;
    size_t max;
    bool too_large = false;
};

size_t on_body(char* data, size_t size, size_t nmemb, void* userp) {
    auto* sink = static_cast<BodySink*>(userp);
    const size_t n = size * nmemb;
    if (n > sink->max - std::min(sink->max, sink->body->size())) {
        sink->too_large = true;
        return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    sink->body->append(data, n);
    return n;
}

struct HeaderSink {
    std::vector<std::pair<std::string, std::string>>* headers;
    size_t bytes = 0;
    bool too_large = false;
};

// Headers beyond this are a broken or hostile server, not a response.
constexpr size_t kMaxHeaderBytes = 1u << 20;

size_t on_header(char* data, size_t size, size_t nmemb, void* userp) {
    auto* sink = static_cast<HeaderSink*>(userp);
    const size_t n = size * nmemb;
    sink->bytes += n;
    if (sink->bytes > kMaxHeaderBytes) {
        sink->too_large = true;
        return 0;
    }
    std::string_view line(data, n);
    // A status line starts a new response (after 100 Continue): keep only the last.
    if (line.substr(0, 5) == "HTTP/") {
        sink->headers->clear();
        return n;
    }
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {  // obsolete line folding
        if (!sink->headers->empty()) {
            std::string more = trim(line);
            if (!more.empty()) sink->headers->back().second += " " + more;
        }
        return n;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return n;  // the blank line that ends the block
    sink->headers->emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
    return n;
}

// ---- errors ----------------------------------------------------------------------

// Values that must never reach a message, whatever libcurl put in its error text.
std::vector<std::string> secrets_of(const HttpRequest& req) {
    std::vector<std::string> out;
    if (!req.basic_password.empty()) {
        out.push_back(req.basic_password);
        out.push_back(base64_encode(req.basic_user + ":" + req.basic_password));
    }
    for (const auto& [name, value] : req.headers) {
        if (!iequals(name, "Authorization") && !iequals(name, "X-Auth-Token") &&
            !iequals(name, "Proxy-Authorization") && !iequals(name, "Cookie"))
            continue;
        out.push_back(value);
        if (size_t sp = value.find(' '); sp != std::string::npos) out.push_back(trim(value.substr(sp + 1)));
    }
    // Short values would blot out ordinary words; libcurl does not echo them anyway.
    out.erase(std::remove_if(out.begin(), out.end(), [](const std::string& s) { return s.size() < 4; }), out.end());
    return out;
}

std::string scrub(std::string text, const std::vector<std::string>& secrets) {
    for (const auto& s : secrets) {
        for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 3))
            text.replace(at, s.size(), "***");
    }
    for (char& c : text)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    return trim(text);
}

class ErrorBuilder {
public:
    explicit ErrorBuilder(const HttpRequest& req)
        : req_(req), prefix_(req.method + " " + url_for_log(req.url) + ": ") {}
    Error operator()(const std::string& code, const std::string& detail, bool transient = false) const {
        return make_error("http", code, scrub(prefix_ + detail, secrets_of(req_)), transient);
    }

private:
    const HttpRequest& req_;
    std::string prefix_;
};

// What libcurl knew when a transfer failed.
struct Failure {
    CURLcode code = CURLE_OK;
    std::string detail;  // libcurl's error buffer, or its strerror
    long os_errno = 0;
    bool body_too_large = false;
    bool headers_too_large = false;
    const PinState* pin = nullptr;
};

Error classify(const Failure& f, const HttpRequest& req, const ErrorBuilder& err) {
    if (f.body_too_large || f.code == CURLE_FILESIZE_EXCEEDED)
        return err("http.too_large", "response larger than " + std::to_string(req.max_response) + " bytes");
    if (f.headers_too_large)
        return err("http.too_large", "response headers larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
    if (f.pin != nullptr && f.pin->mismatch)
        return err("http.tls_pin",
                   "certificate pin mismatch: expected sha256 " + f.pin->expected + ", server sent " + f.pin->seen);
    switch (f.code) {
        case CURLE_COULDNT_CONNECT:
            if (f.os_errno == ECONNREFUSED) return err("http.connect", "connection refused", true);
            if (f.os_errno != 0)
                return err("http.connect",
                           std::string("cannot connect: ") + std::strerror(static_cast<int>(f.os_errno)), true);
            return err("http.connect", "cannot connect: " + f.detail, true);
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
            return err("http.connect", "cannot resolve host: " + f.detail, true);
        case CURLE_OPERATION_TIMEDOUT:
            return err("http.timeout", "timed out: " + f.detail, true);
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return err("http.tls", "TLS verification failed: " + f.detail);
        case CURLE_SSL_CONNECT_ERROR:
            // Also what a peer resetting mid-handshake (a BMC restarting) gives.
            return err("http.tls", "TLS handshake failed: " + f.detail, true);
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
            return err("http.transport", "connection failed: " + f.detail, true);
        case CURLE_WEIRD_SERVER_REPLY:
            return err("http.transport", "bad reply: " + f.detail);
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
            return err("http.url", "bad URL: " + f.detail);
        case CURLE_READ_ERROR:
            return err("http.file", "cannot read the upload: " + f.detail);
        default:
            return err("http.internal", f.detail);
    }
}

// ---- request checks ----------------------------------------------------------------

bool has_header(const HttpRequest& req, const char* name) {
    return std::any_of(req.headers.begin(), req.headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

Result<void> check_request(const HttpRequest& req, const ErrorBuilder& err) {
    if (!is_token(req.method)) return err("http.internal", "invalid method");
    auto parts = split_url(req.url);
    if (!parts) return err("http.url", "bad URL: " + parts.error().message);
    if (parts->scheme != "http" && parts->scheme != "https")
        return err("http.url", "unsupported scheme " + parts->scheme);
    for (const auto& [name, value] : req.headers) {
        if (!is_token(name)) return err("http.internal", "invalid header name");
        // Name only: the value may be a token.
        if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
            return err("http.internal", "header " + name + " holds a line break");
    }
    if (!req.multipart.empty() && !req.body.empty())
        return err("http.internal", "both a body and multipart parts given");
    for (const auto& part : req.multipart) {
        if (part.file_path.empty()) continue;
        struct stat st {};
        if (::stat(part.file_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
            ::access(part.file_path.c_str(), R_OK) != 0)
            return err("http.file", "cannot read " + part.file_path + " for part " + part.name);
    }
    return {};
}

std::once_flag g_init_once;
CURLcode g_init_rc = CURLE_OK;
bool g_openssl = false;

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return v;
    return "";
}

CurlHttpClient::CurlHttpClient() {
    std::call_once(g_init_once, [] {
        // Never paired with curl_global_cleanup: idle handles stay in the
        // pool, and threads may still be sending, until the process ends.
        g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
        const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
        g_openssl =
            info != nullptr && info->ssl_version != nullptr && std::strncmp(info->ssl_version, "OpenSSL", 7) == 0;
    });
}

size_t idle_connections() {
    return idle_handles().size();
}

Result<HttpResponse> CurlHttpClient::send(const HttpRequest& req) {
    const ErrorBuilder err(req);
    if (g_init_rc != CURLE_OK)
        return err("http.internal", std::string("curl_global_init: ") + curl_easy_strerror(g_init_rc));
    if (auto ok = check_request(req, err); !ok) return ok.error();

    std::string pin;
    if (!req.tls.pinned_sha256.empty()) {
        pin = normalize_pin(req.tls.pinned_sha256);
        if (pin.empty()) return err("http.tls_pin", "pinned_sha256 is not 64 hex digits");
        if (!g_openssl) return err("http.internal", "certificate pinning needs libcurl built with OpenSSL");
    }
    // Only a connection to the same place, opened under the same TLS
    // settings and proxy, may serve this request.
    auto dest = split_url(req.url);  // checked above
    const std::string key = dest->scheme + "://" + dest->host + ":" + std::to_string(dest->port) + "\n" +
                            (!pin.empty()     ? "pin " + pin
                             : req.tls.verify ? "verify " + req.tls.ca_bundle
                                              : std::string("noverify")) +
                            "\nproxy " + req.proxy;
    HandlePtr handle;
    if (auto idle = idle_handles().take(key)) {
        handle = std::move(*idle);
    } else {
        handle = std::make_unique<PooledHandle>();
        handle->easy.reset(curl_easy_init());
        if (!handle->easy) return err("http.internal", "curl_easy_init failed");
        if (!pin.empty()) {
            handle->pin = std::make_unique<PinState>();
            handle->pin->expected = pin;
        }
    }
    CURL* h = handle->easy.get();
    if (handle->pin) {
        handle->pin->seen.clear();
        handle->pin->mismatch = false;
    }

    HttpResponse response;
    BodySink body_sink{&response.body, req.max_response};
    HeaderSink header_sink{&response.headers};
    char errbuf[CURL_ERROR_SIZE] = {0};

    HeaderList headers;
    bool headers_ok = true;
    for (const auto& [name, value] : req.headers)
        // "Name;" is libcurl's spelling of a header with an empty value ("Name:" would remove it).
        headers_ok &= headers.append(value.empty() ? name + ";" : name + ": " + value);
    // BMC advice: compressed Redfish replies are a known source of trouble.
    if (!has_header(req, "Accept-Encoding")) headers_ok &= headers.append("Accept-Encoding: identity");
    // No 100-continue round trip: several BMCs mishandle it, and libcurl
    // would otherwise wait a second for it on larger bodies.
    if (!has_header(req, "Expect")) headers_ok &= headers.append("Expect:");
    const bool plain_body = req.multipart.empty() &&
                            (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH");
    // libcurl would label a plain body application/x-www-form-urlencoded; the
    // caller knows the real type.
    if (plain_body && !has_header(req, "Content-Type")) headers_ok &= headers.append("Content-Type:");
    if (!headers_ok) return err("http.internal", "out of memory building headers");

    CurlMime mime;
    if (!req.multipart.empty()) {
        mime.reset(curl_mime_init(h));
        if (!mime) return err("http.internal", "curl_mime_init failed");
        for (const auto& part : req.multipart) {
            curl_mimepart* p = curl_mime_addpart(mime.get());
            if (p == nullptr) return err("http.internal", "curl_mime_addpart failed");
            CURLcode rc = curl_mime_name(p, part.name.c_str());
            if (rc == CURLE_OK) {
                rc = part.file_path.empty() ? curl_mime_data(p, part.data.data(), part.data.size())
                                            : curl_mime_filedata(p, part.file_path.c_str());
            }
            if (rc == CURLE_OK && !part.filename.empty()) rc = curl_mime_filename(p, part.filename.c_str());
            if (rc == CURLE_OK && !part.content_type.empty()) rc = curl_mime_type(p, part.content_type.c_str());
            if (rc != CURLE_OK)
                return err("http.internal", "multipart part " + part.name + ": " + curl_easy_strerror(rc));
        }
    }

    CURLcode rc = CURLE_OK;
    auto set = [&](CURLoption opt, auto value) {
        if (rc == CURLE_OK) rc = curl_easy_setopt(h, opt, value);
    };
    set(CURLOPT_URL, req.url.c_str());
    // An address needs no resolving, and libcurl would still cache it.
    if (is_ip_literal(dest->host)) set(CURLOPT_DNS_CACHE_TIMEOUT, 0L);
    // The handle is one pooled connection (PooledHandle): a reconnect
    // replaces it rather than keeping a second one open.
    set(CURLOPT_MAXCONNECTS, 1L);
    set(CURLOPT_ERRORBUFFER, errbuf);
    set(CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for timeouts
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_FOLLOWLOCATION, 0L);
    set(CURLOPT_PROXY, req.proxy.c_str());  // "" also disables the *_proxy environment
    // HTTP/1.1 only: HTTP/2 in BMC web servers is young and uneven.
    set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    set(CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
    set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout.count()));
    set(CURLOPT_TCP_KEEPALIVE, 1L);
#ifdef KILN_VERSION
    set(CURLOPT_USERAGENT, "kiln/" KILN_VERSION);
#else
    set(CURLOPT_USERAGENT, "kiln");
#endif
    set(CURLOPT_HTTPHEADER, headers.get());
    set(CURLOPT_WRITEFUNCTION, on_body);
    set(CURLOPT_WRITEDATA, &body_sink);
    set(CURLOPT_HEADERFUNCTION, on_header);
    set(CURLOPT_HEADERDATA, &header_sink);
    set(CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(req.max_response));

    if (req.method == "HEAD") {
        set(CURLOPT_NOBODY, 1L);
    } else if (mime) {
        set(CURLOPT_MIMEPOST, mime.get());
        if (req.method != "POST") set(CURLOPT_CUSTOMREQUEST, req.method.c_str());
    } else if (plain_body) {
        set(CURLOPT_POSTFIELDS, req.body.data());
        set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
        if (req.method != "POST") set(CURLOPT_CUSTOMREQUEST, req.method.c_str());
    } else {
        set(CURLOPT_HTTPGET, 1L);
        if (req.method != "GET") set(CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }

    if (!req.basic_user.empty()) {
        set(CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
        set(CURLOPT_USERNAME, req.basic_user.c_str());
        set(CURLOPT_PASSWORD, req.basic_password.c_str());
    }

    if (handle->pin) {
        // libcurl's own checks off; install_pin enforces the pin instead.
        set(CURLOPT_SSL_VERIFYPEER, 0L);
        set(CURLOPT_SSL_VERIFYHOST, 0L);
        set(CURLOPT_SSL_CTX_FUNCTION, install_pin);
        set(CURLOPT_SSL_CTX_DATA, static_cast<void*>(handle->pin.get()));
    } else if (req.tls.verify) {
        set(CURLOPT_SSL_VERIFYPEER, 1L);
        set(CURLOPT_SSL_VERIFYHOST, 2L);
        if (!req.tls.ca_bundle.empty()) set(CURLOPT_CAINFO, req.tls.ca_bundle.c_str());
    } else {
        set(CURLOPT_SSL_VERIFYPEER, 0L);
        set(CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (rc != CURLE_OK) {
        curl_easy_reset(h);
        return err("http.internal", std::string("curl_easy_setopt: ") + curl_easy_strerror(rc));
    }

    rc = curl_easy_perform(h);
    Failure failure;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
    } else {
        failure.code = rc;
        failure.detail = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
        curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &failure.os_errno);
        failure.body_too_large = body_sink.too_large;
        failure.headers_too_large = header_sink.too_large;
        failure.pin = handle->pin.get();
    }
    // Kept only with its connection still open: a failed transfer's handle
    // and whatever it held go, as does one the server said Connection: close to.
    curl_socket_t socket = CURL_SOCKET_BAD;
    const bool keep =
        rc == CURLE_OK && curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK && socket != CURL_SOCKET_BAD;
    // Drop the pointers into this frame (headers, mime, sinks) before they go.
    curl_easy_reset(h);
    if (keep) put_back(key, std::move(handle));
    if (rc != CURLE_OK) return classify(failure, req, err);
    return response;
}

}  // namespace kiln::net
