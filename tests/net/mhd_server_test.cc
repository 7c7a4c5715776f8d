// net::MhdServer, the one libmicrohttpd start-up of kiln-bmc, kiln-switch,
// the artifact server and the metrics endpoint: what it serves and what it
// refuses, with the error codes those four map to their own.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "provisioner/net/http_client.h"
#include "provisioner/net/mhd_server.h"
#include "tests/net/test_server.h"

using kiln::net::MhdServer;
using kiln::net::MhdServerOptions;

namespace {

// Answers every request with "served by <cls>".
MHD_Result answer(void* cls, MHD_Connection* conn, const char*, const char*, const char*, const char*, size_t* upload,
                  void** state) {
    if (*state == nullptr) {  // the first call only announces the request
        static int marker;
        *state = &marker;
        return MHD_YES;
    }
    if (*upload != 0) {
        *upload = 0;
        return MHD_YES;
    }
    const std::string body = std::string("served by ") + static_cast<const char*>(cls);
    MHD_Response* r =
        MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

MhdServerOptions options(const char* name) {
    MhdServerOptions o;
    o.handler = &answer;
    o.handler_cls = const_cast<char*>(name);
    return o;
}

kiln::Result<kiln::net::HttpResponse> get(const std::string& url, const std::string& ca = "") {
    kiln::net::CurlHttpClient http;
    kiln::net::HttpRequest req;
    req.url = url;
    req.timeout = std::chrono::seconds(10);
    if (!ca.empty()) req.tls.ca_bundle = ca;
    return http.send(req);
}

}  // namespace

TEST_CASE("mhd server: listens on the port the kernel picks and serves through the handler") {
    auto s = MhdServer::start(options("a"));
    REQUIRE(s);
    REQUIRE((*s)->port() != 0);
    CHECK_FALSE((*s)->tls());
    auto r = get("http://127.0.0.1:" + std::to_string((*s)->port()) + "/x");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == "served by a");
}

TEST_CASE("mhd server: a taken port, an address that is not IPv4 and half a TLS pair are refused by code") {
    auto first = MhdServer::start(options("a"));
    REQUIRE(first);
    auto o = options("b");
    o.port = (*first)->port();
    auto taken = MhdServer::start(o);
    REQUIRE_FALSE(taken);
    CHECK(taken.error().code == "net.listen");
    CHECK(taken.error().message.find("127.0.0.1:" + std::to_string(o.port)) != std::string::npos);

    auto named = options("c");
    named.bind_address = "localhost";
    auto not_ipv4 = MhdServer::start(named);
    REQUIRE_FALSE(not_ipv4);
    CHECK(not_ipv4.error().code == "net.bind_address");

    auto half = options("d");
    half.cert_file = kiln::net::test::TestServer::shared().cert_path();
    auto half_tls = MhdServer::start(half);
    REQUIRE_FALSE(half_tls);
    CHECK(half_tls.error().code == "net.tls");

    auto missing = options("e");
    missing.cert_file = "/nonexistent/cert.pem";
    missing.key_file = "/nonexistent/key.pem";
    auto unreadable = MhdServer::start(missing);
    REQUIRE_FALSE(unreadable);
    CHECK(unreadable.error().code == "net.tls");
    CHECK(unreadable.error().message.find("/nonexistent/cert.pem") != std::string::npos);
}

TEST_CASE("mhd server: with a certificate and key it serves HTTPS that verifies against that certificate") {
    const auto& certs = kiln::net::test::TestServer::shared();
    auto o = options("tls");
    o.cert_file = certs.cert_path();
    o.key_file = certs.temp_dir() + "/key.pem";
    auto s = MhdServer::start(o);
    REQUIRE(s);
    CHECK((*s)->tls());
    auto r = get("https://127.0.0.1:" + std::to_string((*s)->port()) + "/", certs.cert_path());
    INFO((r ? std::string() : r.error().str()));
    REQUIRE(r);
    CHECK(r->body == "served by tls");
    // Plain HTTP to it gets no answer it could take for one.
    auto plain = get("http://127.0.0.1:" + std::to_string((*s)->port()) + "/");
    CHECK((!plain || plain->status != 200));
}
