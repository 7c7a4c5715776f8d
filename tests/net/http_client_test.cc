// CurlHttpClient against a real local server (tests/net/http_test_server.py)
// over HTTP and HTTPS with a self-signed certificate.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <dirent.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "provisioner/core/idle_connection_budget.h"
#include "provisioner/core/sha256.h"
#include "provisioner/net/http_client.h"
#include "tests/net/test_server.h"

using kiln::net::CurlHttpClient;
using kiln::net::HttpRequest;
using kiln::net::HttpResponse;
using kiln::net::MultipartPart;
using kiln::net::test::TestServer;
using nlohmann::json;

namespace {

TestServer& server() {
    return TestServer::shared();
}

HttpRequest get(const std::string& url) {
    HttpRequest r;
    r.url = url;
    return r;
}

// The echo reply's header, case-insensitive; "" when absent.
std::string echoed_header(const json& echo, const std::string& name) {
    for (const auto& h : echo["headers"]) {
        std::string k = h[0];
        if (Catch::toLower(k) == Catch::toLower(name)) return h[1];
    }
    return "";
}

int count_echoed_header(const json& echo, const std::string& name) {
    int n = 0;
    for (const auto& h : echo["headers"])
        if (Catch::toLower(h[0].get<std::string>()) == Catch::toLower(name)) ++n;
    return n;
}

json send_json(CurlHttpClient& client, const HttpRequest& req) {
    auto r = client.send(req);
    INFO((r ? std::string() : r.error().str()));
    REQUIRE(r.ok());
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

// Whether this process holds an open TCP connection from 127.0.0.1:client_port
// to server_port (ESTABLISHED in /proc/net/tcp: once our side closes it, it
// never is again, whatever the server has noticed yet).
bool established(int client_port, int server_port) {
    std::ifstream tcp("/proc/net/tcp");
    std::string line;
    std::getline(tcp, line);  // header
    char local[32], remote[32];
    const std::string want_local = "0100007F:" + [&] {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%04X", client_port);
        return std::string(hex);
    }();
    while (std::getline(tcp, line)) {
        unsigned state = 0;
        if (std::sscanf(line.c_str(), "%*d: %31s %31s %x", local, remote, &state) != 3) continue;
        const std::string r = remote;
        if (local == want_local && std::stoi(r.substr(r.find(':') + 1), nullptr, 16) == server_port && state == 0x01)
            return true;
    }
    return false;
}

// Sets the idle-connection budget for one test, after emptying the pool.
class BudgetScope {
public:
    explicit BudgetScope(long budget) {
        kiln::set_idle_connection_budget(0);
        CurlHttpClient client;
        (void)client.send(get(server().http_url("/echo")));  // a put under budget 0 drops every idle handle
        REQUIRE(kiln::net::idle_connections() == 0);
        kiln::set_idle_connection_budget(budget);
    }
    ~BudgetScope() { kiln::set_idle_connection_budget(kiln::kDefaultIdleConnections); }
};

HttpRequest pinned(const std::string& path) {
    HttpRequest r = get(server().https_url(path));
    r.tls.pinned_sha256 = server().cert_sha256();
    return r;
}

}  // namespace

TEST_CASE("GET POST and PATCH round trip headers and body", "[net][http]") {
    CurlHttpClient client;
    for (std::string method : {"GET", "POST", "PATCH", "PUT", "DELETE"}) {
        SECTION(method) {
            HttpRequest req = get(server().http_url("/echo?x=1"));
            req.method = method;
            req.headers = {{"X-Kiln-Test", "value " + method}, {"If-Match", "W/\"etag-1\""}};
            const bool with_body = method != "GET" && method != "DELETE";
            if (with_body) {
                req.body = R"({"Attributes": {"SriovGlobalEnable": "Enabled"}, "m": ")" + method + "\"}";
                req.headers.emplace_back("Content-Type", "application/json");
            }
            json echo = send_json(client, req);
            CHECK(echo["method"] == method);
            CHECK(echo["path"] == "/echo");
            CHECK(echo["query"] == "x=1");
            CHECK(echoed_header(echo, "X-Kiln-Test") == "value " + method);
            CHECK(echoed_header(echo, "If-Match") == "W/\"etag-1\"");
            CHECK(echoed_header(echo, "Accept-Encoding") == "identity");
            CHECK(echoed_header(echo, "Expect").empty());
            CHECK(echo["body"] == req.body);
            if (with_body) {
                CHECK(echoed_header(echo, "Content-Type") == "application/json");
                CHECK(echoed_header(echo, "Content-Length") == std::to_string(req.body.size()));
            } else {
                CHECK(echoed_header(echo, "Content-Type").empty());
            }
        }
    }
}

TEST_CASE("A body without a Content-Type gets none from libcurl", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/echo"));
    req.method = "POST";
    req.body = "a=b";
    json echo = send_json(client, req);
    CHECK(echoed_header(echo, "Content-Type").empty());
    CHECK(echo["body"] == "a=b");
}

TEST_CASE("An empty POST sends Content-Length 0", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/echo"));
    req.method = "POST";
    json echo = send_json(client, req);
    CHECK(echo["method"] == "POST");
    CHECK(echoed_header(echo, "Content-Length") == "0");
}

TEST_CASE("A caller's Accept-Encoding replaces identity", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/echo"));
    req.headers = {{"accept-encoding", "gzip"}};
    json echo = send_json(client, req);
    CHECK(echoed_header(echo, "Accept-Encoding") == "gzip");
    CHECK(count_echoed_header(echo, "Accept-Encoding") == 1);
}

TEST_CASE("Response headers come back and header() is case-insensitive", "[net][http]") {
    CurlHttpClient client;
    auto r = client.send(get(server().http_url("/echo")));
    REQUIRE(r.ok());
    CHECK(r->header("x-kiln-echo") == "1");
    CHECK(r->header("CONTENT-TYPE") == "application/json");
    CHECK(r->header("X-Multi") == "first");
    CHECK(r->header("X-Absent").empty());
    int multi = 0;
    for (const auto& [k, v] : r->headers)
        if (Catch::toLower(k) == "x-multi") ++multi;
    CHECK(multi == 2);
}

TEST_CASE("HTTP error statuses are responses not errors", "[net][http]") {
    CurlHttpClient client;
    auto not_found = client.send(get(server().http_url("/status/404")));
    REQUIRE(not_found.ok());
    CHECK(not_found->status == 404);
    CHECK(not_found->body == "status 404");

    auto busy = client.send(get(server().http_url("/status/503")));
    REQUIRE(busy.ok());
    CHECK(busy->status == 503);
    CHECK(busy->header("Retry-After") == "7");

    auto accepted = client.send(get(server().https_url("/status/202")));
    CHECK_FALSE(accepted.ok());  // untrusted certificate: the status is never seen
    auto accepted_pinned = client.send(pinned("/status/202"));
    REQUIRE(accepted_pinned.ok());
    CHECK(accepted_pinned->status == 202);
}

TEST_CASE("HEAD returns headers without a body", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/status/404"));
    req.method = "HEAD";
    auto r = client.send(req);
    REQUIRE(r.ok());
    CHECK(r->status == 404);
    CHECK(r->body.empty());
    CHECK(r->header("Content-Length") == "10");
}

TEST_CASE("Connection refused is a transient http.connect error", "[net][http]") {
    CurlHttpClient client;
    const int port = kiln::net::test::unused_port();
    auto r = client.send(get("http://127.0.0.1:" + std::to_string(port) + "/redfish/v1?token=abc"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().domain == "http");
    CHECK(r.error().code == "http.connect");
    CHECK(r.error().transient);
    CHECK(r.error().message == "GET http://127.0.0.1:" + std::to_string(port) + "/redfish/v1: connection refused");
}

TEST_CASE("A stalled server gives a transient http.timeout", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/stall?s=5"));
    req.timeout = std::chrono::milliseconds(400);
    auto r = client.send(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.timeout");
    CHECK(r.error().transient);
    CHECK(r.error().message.find('\n') == std::string::npos);
}

TEST_CASE("Malformed URLs give http.url", "[net][http]") {
    CurlHttpClient client;
    for (std::string url : {"", "not a url", "ftp://127.0.0.1/x", "http://", "http://127.0.0.1:99999/"}) {
        auto r = client.send(get(url));
        INFO(url);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "http.url");
        CHECK_FALSE(r.error().transient);
    }
}

TEST_CASE("Header values with line breaks are refused before sending", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/echo"));
    req.headers = {{"X-Auth-Token", "tok\r\nX-Injected: 1"}};
    auto r = client.send(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.internal");
    CHECK(r.error().message.find("tok") == std::string::npos);

    req.headers = {{"Bad Name", "v"}};
    CHECK(client.send(req).error().code == "http.internal");
    req.headers.clear();
    req.method = "GET X";
    CHECK(client.send(req).error().code == "http.internal");
}

TEST_CASE("TLS with an untrusted self-signed certificate fails with http.tls", "[net][tls]") {
    CurlHttpClient client;
    auto r = client.send(get(server().https_url("/echo")));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.tls");
    CHECK_FALSE(r.error().transient);
    CHECK(r.error().message.rfind("GET https://127.0.0.1:" + std::to_string(server().https_port()) + "/echo: ", 0) ==
          0);
}

TEST_CASE("TLS with the certificate as CA bundle verifies", "[net][tls]") {
    CurlHttpClient client;
    HttpRequest req = get(server().https_url("/echo"));
    req.tls.ca_bundle = server().cert_path();
    json echo = send_json(client, req);
    CHECK(echo["method"] == "GET");

    // The CA check includes the name: "localhost" is not in the certificate.
    req.url = "https://localhost:" + std::to_string(server().https_port()) + "/echo";
    auto wrong_name = client.send(req);
    REQUIRE_FALSE(wrong_name.ok());
    CHECK(wrong_name.error().code == "http.tls");
}

TEST_CASE("TLS with a missing CA bundle file fails with http.tls", "[net][tls]") {
    CurlHttpClient client;
    HttpRequest req = get(server().https_url("/echo"));
    req.tls.ca_bundle = server().temp_dir() + "/no-such-bundle.pem";
    auto r = client.send(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.tls");
}

TEST_CASE("TLS with the right pin verifies without CA or host name", "[net][tls]") {
    CurlHttpClient client;
    json echo = send_json(client, pinned("/echo"));
    CHECK(echo["method"] == "GET");

    // Any host name, and the pin as openssl prints it (uppercase, colons).
    std::string printed;
    const std::string& pin = server().cert_sha256();
    for (size_t i = 0; i < pin.size(); ++i) {
        if (i && i % 2 == 0) printed += ':';
        printed += static_cast<char>(std::toupper(static_cast<unsigned char>(pin[i])));
    }
    HttpRequest req = get("https://localhost:" + std::to_string(server().https_port()) + "/echo");
    req.tls.pinned_sha256 = printed;
    json echo2 = send_json(client, req);
    CHECK(echo2["path"] == "/echo");
}

TEST_CASE("TLS with a wrong pin fails with http.tls_pin naming both fingerprints", "[net][tls]") {
    CurlHttpClient client;
    const std::string wrong(64, 'a');
    HttpRequest req = pinned("/echo");
    req.tls.pinned_sha256 = wrong;
    req.tls.verify = false;  // the pin holds whatever verify says
    auto r = client.send(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.tls_pin");
    CHECK_FALSE(r.error().transient);
    CHECK(r.error().message.find(wrong) != std::string::npos);
    CHECK(r.error().message.find(server().cert_sha256()) != std::string::npos);

    // The same thread then pins right and gets through.
    auto ok = client.send(pinned("/echo"));
    CHECK(ok.ok());
}

TEST_CASE("A connection kept from an unverified request never serves a pinned one", "[net][tls]") {
    CurlHttpClient client;
    HttpRequest loose = get(server().https_url("/echo"));
    loose.tls.verify = false;
    REQUIRE(client.send(loose).ok());  // leaves a kept-alive connection behind

    HttpRequest strict = pinned("/echo");
    strict.tls.pinned_sha256 = std::string(64, 'b');
    auto r = client.send(strict);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.tls_pin");

    HttpRequest ca = get(server().https_url("/echo"));
    ca.tls.ca_bundle = server().temp_dir() + "/no-such-bundle.pem";
    CHECK_FALSE(client.send(ca).ok());
}

TEST_CASE("A malformed pin is refused", "[net][tls]") {
    CurlHttpClient client;
    HttpRequest req = pinned("/echo");
    req.tls.pinned_sha256 = "abc123";
    auto r = client.send(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.tls_pin");
}

TEST_CASE("verify false accepts an untrusted certificate", "[net][tls]") {
    CurlHttpClient client;
    HttpRequest req = get(server().https_url("/echo"));
    req.tls.verify = false;
    json echo = send_json(client, req);
    CHECK(echo["method"] == "GET");
}

TEST_CASE("Responses over max_response fail with http.too_large", "[net][http]") {
    CurlHttpClient client;
    SECTION("with Content-Length") {
        HttpRequest req = get(server().http_url("/big?n=100000"));
        req.max_response = 1000;
        auto r = client.send(req);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "http.too_large");
        CHECK_FALSE(r.error().transient);
    }
    SECTION("chunked") {
        HttpRequest req = get(server().http_url("/big?n=100000&chunked=1"));
        req.max_response = 1000;
        auto r = client.send(req);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "http.too_large");
    }
    SECTION("exactly at the limit") {
        for (std::string chunked : {"0", "1"}) {
            HttpRequest req = get(server().http_url("/big?n=50000&chunked=" + chunked));
            req.max_response = 50000;
            auto r = client.send(req);
            REQUIRE(r.ok());
            CHECK(r->body == std::string(50000, 'x'));
        }
    }
}

TEST_CASE("A multipart upload arrives with both parts intact", "[net][http]") {
    CurlHttpClient client;
    // A firmware-like file: every byte value, CRLFs and boundary-like runs included.
    const std::string path = server().temp_dir() + "/bmc-fw.bin";
    std::string image;
    for (int i = 0; i < 3 * 1024 * 1024; ++i) image += static_cast<char>((i * 7 + i / 251) & 0xFF);
    image += "\r\n--------------------------\r\n";
    std::ofstream(path, std::ios::binary) << image;

    const std::string params = R"({"Targets": ["/redfish/v1/Managers/bmc"], "@Redfish.OperationApplyTime": "OnReset"})";
    HttpRequest req = get(server().https_url("/multipart"));
    req.method = "POST";
    req.tls.pinned_sha256 = server().cert_sha256();
    req.multipart = {
        MultipartPart{"UpdateParameters", "application/json", params, "", ""},
        MultipartPart{"UpdateFile", "application/octet-stream", "", path, "firmware.bin"},
    };
    json got = send_json(client, req);
    INFO(got.dump());
    REQUIRE(got["parts"].size() == 2);
    CHECK(got["parts"][0]["name"] == "UpdateParameters");
    CHECK(got["parts"][0]["content_type"] == "application/json");
    CHECK(got["parts"][0]["filename"].is_null());
    CHECK(got["parts"][0]["sha256"] == kiln::sha256_hex(params));
    CHECK(got["parts"][1]["name"] == "UpdateFile");
    CHECK(got["parts"][1]["filename"] == "firmware.bin");
    CHECK(got["parts"][1]["content_type"] == "application/octet-stream");
    CHECK(got["parts"][1]["size"] == image.size());
    CHECK(got["parts"][1]["sha256"] == kiln::sha256_hex(image));

    // Without a filename the file's basename is sent.
    req.multipart[1].filename.clear();
    json again = send_json(client, req);
    CHECK(again["parts"][1]["filename"] == "bmc-fw.bin");
}

TEST_CASE("A multipart file that cannot be read gives http.file", "[net][http]") {
    CurlHttpClient client;
    HttpRequest req = get(server().http_url("/multipart"));
    req.method = "POST";
    req.multipart = {MultipartPart{"UpdateFile", "", "", server().temp_dir() + "/missing.bin", ""}};
    auto r = client.send(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "http.file");
}

TEST_CASE("Basic auth reaches the server and never appears in error messages", "[net][http]") {
    CurlHttpClient client;
    const std::string user = "kiln-admin";
    const std::string password = "s3cret-Passw0rd";
    const std::string token = "tok-7f3a9c1e5b";
    auto with_auth = [&](HttpRequest r) {
        r.basic_user = user;
        r.basic_password = password;
        return r;
    };

    json seen = send_json(client, with_auth(get(server().http_url("/auth"))));
    CHECK(seen["user"] == user);
    CHECK(seen["password"] == password);

    std::vector<HttpRequest> failing;
    failing.push_back(with_auth(get("http://127.0.0.1:" + std::to_string(kiln::net::test::unused_port()) + "/x")));
    failing.push_back(with_auth(get(server().https_url("/auth"))));
    HttpRequest stall = with_auth(get(server().http_url("/stall?s=5")));
    stall.timeout = std::chrono::milliseconds(300);
    failing.push_back(stall);
    HttpRequest wrong_pin = with_auth(pinned("/auth"));
    wrong_pin.tls.pinned_sha256 = std::string(64, 'c');
    failing.push_back(wrong_pin);
    HttpRequest big = with_auth(get(server().http_url("/big?n=5000")));
    big.max_response = 10;
    failing.push_back(big);
    HttpRequest in_url = get("http://" + user + ":" + password +
                             "@127.0.0.1:" + std::to_string(kiln::net::test::unused_port()) + "/x?token=" + token);
    failing.push_back(in_url);
    HttpRequest headers = get(server().https_url("/x"));
    headers.headers = {{"Authorization", "Bearer " + token}, {"X-Auth-Token", token}};
    failing.push_back(headers);

    const std::string encoded = "a2lsbi1hZG1pbjpzM2NyZXQtUGFzc3cwcmQ=";  // base64("kiln-admin:s3cret-Passw0rd")
    for (const auto& req : failing) {
        auto r = client.send(req);
        REQUIRE_FALSE(r.ok());
        const std::string text = r.error().str();
        INFO(text);
        CHECK(text.find(password) == std::string::npos);
        CHECK(text.find(encoded) == std::string::npos);
        CHECK(text.find(token) == std::string::npos);
        CHECK(text.find('\n') == std::string::npos);
    }
}

TEST_CASE("Connections are reused within a thread", "[net][http]") {
    CurlHttpClient client;
    json first = send_json(client, get(server().http_url("/echo")));
    json second = send_json(client, get(server().http_url("/echo")));
    CHECK(first["client_port"] == second["client_port"]);

    json tls1 = send_json(client, pinned("/echo"));
    json tls2 = send_json(client, pinned("/echo"));
    CHECK(tls1["client_port"] == tls2["client_port"]);
}

TEST_CASE("Requests to one destination from two threads in sequence reuse one connection", "[net][http]") {
    // A node parked between task polls resumes on any pool thread: its
    // BMC's connection must not stay behind with the thread it left.
    CurlHttpClient client;
    for (const bool tls : {false, true}) {
        INFO((tls ? "https pinned" : "http"));
        const HttpRequest req = tls ? pinned("/echo") : get(server().http_url("/echo"));
        json first, second;
        std::thread([&] { first = send_json(client, req); }).join();
        std::thread([&] { second = send_json(client, req); }).join();
        CHECK(first["client_port"] == second["client_port"]);
    }
}

TEST_CASE("Connections opened under different TLS settings are never shared", "[net][tls]") {
    CurlHttpClient client;
    HttpRequest loose = get(server().https_url("/echo"));
    loose.tls.verify = false;
    HttpRequest ca = get(server().https_url("/echo"));
    ca.tls.ca_bundle = server().cert_path();
    const int p_loose = send_json(client, loose)["client_port"];
    const int p_pinned = send_json(client, pinned("/echo"))["client_port"];
    const int p_ca = send_json(client, ca)["client_port"];
    CHECK(p_loose != p_pinned);
    CHECK(p_loose != p_ca);
    CHECK(p_pinned != p_ca);
    // Each setting still finds its own connection.
    CHECK(send_json(client, loose)["client_port"] == p_loose);
    CHECK(send_json(client, pinned("/echo"))["client_port"] == p_pinned);
    CHECK(send_json(client, ca)["client_port"] == p_ca);
}

TEST_CASE("The idle-connection budget closes the least recently used connection", "[net][http]") {
    BudgetScope budget(2);
    CurlHttpClient client;
    HttpRequest loose = get(server().https_url("/echo"));
    loose.tls.verify = false;
    const int http = server().http_port(), https = server().https_port();
    // Three destinations in turn under a budget of two: the first one's
    // connection is closed, the other two stay open.
    const int p_http = send_json(client, get(server().http_url("/echo")))["client_port"];
    const int p_loose = send_json(client, loose)["client_port"];
    const int p_pinned = send_json(client, pinned("/echo"))["client_port"];
    CHECK(kiln::net::idle_connections() == 2);
    CHECK_FALSE(established(p_http, http));
    CHECK(established(p_loose, https));
    CHECK(established(p_pinned, https));
    // Back to the first: a new connection, and now the unverified one is the oldest.
    const int p_http2 = send_json(client, get(server().http_url("/echo")))["client_port"];
    CHECK(p_http2 != p_http);
    CHECK(kiln::net::idle_connections() == 2);
    CHECK_FALSE(established(p_loose, https));
    CHECK(established(p_pinned, https));
    CHECK(established(p_http2, http));
}

TEST_CASE("Each idle connection holds no more open files than budgeted for it", "[net][http]") {
    // The engine lends the pool kFilesPerIdleConnection files per connection
    // of its budget (engine/open_files.h): more would run a run out of files.
    BudgetScope budget(8);
    auto open_files = [] {
        int n = 0;
        if (DIR* d = ::opendir("/proc/self/fd")) {
            while (::readdir(d) != nullptr) ++n;
            ::closedir(d);
        }
        return n;
    };
    CurlHttpClient client;
    HttpRequest loose = get(server().https_url("/echo"));
    loose.tls.verify = false;
    const int before = open_files();
    send_json(client, get(server().http_url("/echo")));
    send_json(client, loose);
    send_json(client, pinned("/echo"));
    const int after = open_files();
    REQUIRE(kiln::net::idle_connections() == 3);
    CHECK(after - before >= 3);
    CHECK(after - before <= 3 * kiln::kFilesPerIdleConnection);
}

TEST_CASE("A budget of no idle connections keeps none open", "[net][http]") {
    BudgetScope budget(0);
    CurlHttpClient client;
    const int port = send_json(client, get(server().http_url("/echo")))["client_port"];
    CHECK(kiln::net::idle_connections() == 0);
    CHECK_FALSE(established(port, server().http_port()));
}

TEST_CASE("An idle connection the server closed is dropped and the next request succeeds", "[net][http]") {
    CurlHttpClient client;
    for (const bool tls : {false, true}) {
        INFO((tls ? "https pinned" : "http"));
        // The server closes this one after its reply, without a Connection: close.
        const int closed =
            send_json(client, tls ? pinned("/echo?close=1") : get(server().http_url("/echo?close=1")))["client_port"];
        HttpRequest next = tls ? pinned("/echo") : get(server().http_url("/echo"));
        next.method = "POST";
        next.body = "after the close";
        next.headers = {{"Content-Type", "text/plain"}};
        json echo = send_json(client, next);
        CHECK(echo["body"] == "after the close");
        CHECK(echo["client_port"] != closed);
    }
}

TEST_CASE("Many threads sending at once all succeed", "[net][http]") {
    CurlHttpClient client;
    constexpr int kThreads = 8, kRequests = 25;
    std::vector<int> ok(kThreads, 0);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kRequests; ++i) {
                HttpRequest req = (i % 2) ? pinned("/echo") : get(server().http_url("/echo"));
                req.method = "POST";
                req.body = "thread " + std::to_string(t) + " request " + std::to_string(i);
                req.headers = {{"Content-Type", "text/plain"}};
                auto r = client.send(req);
                if (r.ok() && r->status == 200 && json::parse(r->body)["body"] == req.body)
                    ++ok[t];
                else if (errors[t].empty())
                    errors[t] = r.ok() ? "status " + std::to_string(r->status) : r.error().str();
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        INFO("thread " << t << ": " << errors[t]);
        CHECK(ok[t] == kRequests);
    }
}
