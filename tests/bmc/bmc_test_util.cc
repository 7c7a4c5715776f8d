#include "tests/bmc/bmc_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "provisioner/core/command.h"

extern char** environ;

namespace kiln::bmc::test {

std::string mockup_path(const std::string& name) {
    return std::string(KILN_REDFISH_MOCKUPS) + "/" + name;
}

const MockupTree& mockup(const std::string& name) {
    static std::mutex mu;
    static std::map<std::string, MockupTree> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(name);
    if (it == cache.end()) {
        auto tree = MockupTree::load(mockup_path(name));
        if (!tree) throw std::runtime_error(tree.error().str());
        it = cache.emplace(name, std::move(*tree)).first;
    }
    return it->second;
}

ScratchDir::ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-bmc-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
}

ScratchDir::~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::string basic_auth(const std::string& user, const std::string& password) {
    const std::string plain = user + ":" + password;
    std::string out(4 * ((plain.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(plain.data()), static_cast<int>(plain.size()));
    out.resize(static_cast<size_t>(n));
    return "Basic " + out;
}

BmcRequest request(const std::string& method, const std::string& path, const std::string& body,
                   const HeaderMap& headers) {
    BmcRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    r.headers = headers;
    return r;
}

nlohmann::json body_of(const BmcResponse& r) {
    if (r.body.empty()) return nullptr;
    return nlohmann::json::parse(r.body);
}

BmcChild::~BmcChild() {
    if (pid_ > 0) stop();
}

bool BmcChild::start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                     int bmc_count) {
    int out_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return false;
    err_file_ = dir_.file("stderr.txt");

    std::map<std::string, std::string> merged;
    for (char** e = environ; *e; ++e) {
        std::string kv = *e;
        auto eq = kv.find('=');
        if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) merged[k] = v;
    std::vector<std::string> env_strings, argv_strings{KILN_BMC_BINARY};
    for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
        dup2(out_pipe[1], 1);
        int err = open(err_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (err >= 0) dup2(err, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    close(out_pipe[1]);
    out_fd_ = out_pipe[0];

    // Read until every BMC announced itself: no sleeps, no polling the port.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    size_t scanned = 0;
    while (static_cast<int>(urls_.size()) < bmc_count) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{out_fd_, POLLIN, 0};
        int rc = poll(&p, 1, static_cast<int>(left.count()));
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) return false;
        char buf[4096];
        ssize_t n = read(out_fd_, buf, sizeof buf);
        if (n <= 0) return false;  // the child closed stdout: it is gone
        out_.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = out_.find('\n', scanned)) != std::string::npos) {
            std::string line = out_.substr(scanned, nl - scanned);
            scanned = nl + 1;
            if (line.rfind("bmc ", 0) != 0) continue;
            auto start = line.find(": ");
            auto end = line.find(' ', start + 2);
            if (start != std::string::npos) urls_.push_back(line.substr(start + 2, end - start - 2));
        }
    }
    return true;
}

int BmcChild::stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    // Bounded wait: a child that ignores SIGTERM must not hang the suite.
    for (int i = 0; i < 200; ++i) {
        pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) break;
        if (i == 199) {
            kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
            break;
        }
        usleep(50 * 1000);
    }
    pid_ = -1;
    if (out_fd_ >= 0) {
        char buf[4096];
        ssize_t n;
        while ((n = read(out_fd_, buf, sizeof buf)) > 0) out_.append(buf, static_cast<size_t>(n));
        close(out_fd_);
        out_fd_ = -1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return -WTERMSIG(status);
}

std::string BmcChild::host_port(size_t i) const {
    const std::string& u = urls_.at(i);
    return u.substr(u.find("://") + 3);
}

std::string BmcChild::errors() const {
    std::ifstream in(err_file_);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

namespace {

// Runs a spec and reads stdout as JSON when it is JSON.
ScriptResult run_spec(kiln::CommandSpec spec) {
    spec.timeout = std::chrono::seconds(120);
    kiln::ProcessRunner runner;
    ScriptResult out;
    auto r = runner.run(spec);
    if (!r) {
        out.err = r.error().str();
        return out;
    }
    out.exit_code = r->exit_code;
    out.out = r->out;
    out.err = r->err;
    out.json = nlohmann::json::parse(out.out, nullptr, false);
    if (out.json.is_discarded()) out.json = nullptr;
    return out;
}

}  // namespace

ScriptResult run_program(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
    kiln::CommandSpec spec;
    spec.argv = argv;
    spec.env = env;
    return run_spec(std::move(spec));
}

ScriptResult run_python(const std::string& script, const std::vector<std::string>& args,
                        const std::string& stdin_data) {
    kiln::CommandSpec spec;
    spec.argv = {KILN_BMC_PYTHON, std::string(KILN_BMC_TEST_DIR) + "/" + script};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.env = {{"KILN_BMC_PASSWORD", kPassword}, {"PYTHONDONTWRITEBYTECODE", "1"}};
    spec.stdin_data = stdin_data;
    return run_spec(std::move(spec));
}

ImageServer::ImageServer(std::map<std::string, std::string> files) : files_(std::move(files)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 16) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        throw std::runtime_error("ImageServer cannot listen");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
}

ImageServer::~ImageServer() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
}

std::string ImageServer::url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void ImageServer::serve() {
    while (!stop_) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            return;
        }
        std::string req;
        char buf[4096];
        while (req.find("\r\n\r\n") == std::string::npos) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0) break;
            req.append(buf, static_cast<size_t>(n));
        }
        const auto sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
        const std::string path = sp1 == std::string::npos ? "" : req.substr(sp1 + 1, sp2 - sp1 - 1);
        auto it = files_.find(path);
        std::string head, body;
        if (it == files_.end()) {
            body = "not found";
            head = "HTTP/1.1 404 Not Found\r\n";
        } else {
            body = it->second;
            head = "HTTP/1.1 200 OK\r\n";
        }
        head += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
        const std::string out = head + body;
        ++requests_;  // before the answer: a client done reading may look at once
        size_t done = 0;
        while (done < out.size()) {
            ssize_t n = send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
            if (n <= 0) break;
            done += static_cast<size_t>(n);
        }
        close(fd);
    }
}

std::string kiln_image(const std::string& component, const std::string& version, size_t padding) {
    return "KILN-FW " + component + " " + version + "\n" + std::string(padding, 'x');
}

nlohmann::json probe(const std::string& base_url, const nlohmann::json& requests) {
    auto r = run_python("http_probe.py", {base_url}, requests.dump());
    if (r.exit_code != 0 || !r.json.is_array()) {
        throw std::runtime_error("http_probe.py failed: " + r.err + r.out);
    }
    return r.json;
}

}  // namespace kiln::bmc::test
