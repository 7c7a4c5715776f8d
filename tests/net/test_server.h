// The local HTTP/HTTPS server the HTTP client tests talk to:
// tests/net/http_test_server.py run as a child process, with a self-signed
// certificate for 127.0.0.1 made by the openssl CLI in a temp dir. One per
// test process, started on first use; it reports its ports on stdout, so no
// test sleeps waiting for it.
#pragma once

#include <string>

namespace kiln::net::test {

class TestServer {
public:
    static TestServer& shared();
    ~TestServer();
    TestServer(const TestServer&) = delete;
    TestServer& operator=(const TestServer&) = delete;

    int http_port() const { return http_port_; }
    int https_port() const { return https_port_; }
    std::string http_url(const std::string& path) const;    // "http://127.0.0.1:P" + path
    std::string https_url(const std::string& path) const;   // "https://127.0.0.1:P" + path
    const std::string& cert_path() const { return cert_; }  // PEM, also usable as the CA bundle
    // Lowercase hex SHA-256 of the certificate's DER, from `openssl x509 -fingerprint`.
    const std::string& cert_sha256() const { return sha256_; }
    const std::string& temp_dir() const { return dir_; }

private:
    TestServer();
    std::string dir_, cert_, key_, sha256_;
    int http_port_ = 0, https_port_ = 0;
    int pid_ = -1;
    int stdin_fd_ = -1;
};

// A port on 127.0.0.1 that nothing listens on (bound, then closed).
int unused_port();

}  // namespace kiln::net::test
