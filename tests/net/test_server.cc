#include "tests/net/test_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "provisioner/core/command.h"

#ifndef KILN_NET_TEST_SERVER
#error "KILN_NET_TEST_SERVER must name tests/net/http_test_server.py"
#endif
#ifndef KILN_PYTHON3
#define KILN_PYTHON3 "python3"
#endif

extern char** environ;

namespace kiln::net::test {

namespace {

std::string run_or_throw(const std::vector<std::string>& argv) {
    ProcessRunner runner;
    CommandSpec spec;
    spec.argv = argv;
    spec.timeout = std::chrono::seconds(60);
    auto r = runner.run(spec);
    if (!r) throw std::runtime_error(r.error().str());
    if (!r->success()) throw std::runtime_error(describe_argv(argv) + " failed: " + r->err);
    return r->out;
}

}  // namespace

TestServer& TestServer::shared() {
    static TestServer server;
    return server;
}

TestServer::TestServer() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-net-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";
    // EC keys: much faster to make than RSA. The SAN makes 127.0.0.1 pass
    // libcurl's host check when the cert is given as the CA bundle.
    run_or_throw({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key_,
                  "-out", cert_});
    // "sha256 Fingerprint=AB:CD:..." -> "abcd..."
    std::string fp = run_or_throw({"openssl", "x509", "-in", cert_, "-noout", "-fingerprint", "-sha256"});
    for (char c : fp.substr(fp.find('=') + 1))
        if (std::isxdigit(static_cast<unsigned char>(c))) sha256_ += static_cast<char>(std::tolower(c));

    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> args = {KILN_PYTHON3, KILN_NET_TEST_SERVER, "--cert", cert_, "--key", key_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
    pid_ = pid;
    stdin_fd_ = in[1];

    // The first line is "HTTP_PORT HTTPS_PORT", written once both listen.
    std::string line;
    char c = 0;
    while (line.find('\n') == std::string::npos) {
        pollfd p{out[0], POLLIN, 0};
        if (::poll(&p, 1, 30000) <= 0 || ::read(out[0], &c, 1) != 1) break;
        line += c;
    }
    ::close(out[0]);
    if (std::sscanf(line.c_str(), "%d %d", &http_port_, &https_port_) != 2 || http_port_ <= 0 || https_port_ <= 0)
        throw std::runtime_error("test server did not report its ports: '" + line + "'");
}

TestServer::~TestServer() {
    if (stdin_fd_ >= 0) ::close(stdin_fd_);  // the server exits at EOF
    if (pid_ > 0) {
        int status = 0;
        for (int i = 0; i < 200 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(10000);
        if (::waitpid(pid_, &status, WNOHANG) == 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
        }
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string TestServer::http_url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(http_port_) + path;
}

std::string TestServer::https_url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(https_port_) + path;
}

int unused_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        throw std::runtime_error("cannot find a free port");
    ::close(fd);  // not listening: connects get ECONNREFUSED
    return ntohs(addr.sin_port);
}

}  // namespace kiln::net::test
