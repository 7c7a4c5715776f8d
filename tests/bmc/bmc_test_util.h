// Helpers for the kiln-bmc tests: the shared mockups, scratch folders,
// hand-built requests, a kiln-bmc child process that is ready when it says
// so, and the Python clients (sushy, http.client) run as child processes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/bmc/http_exchange.h"
#include "firmware/bmc/mockup_tree.h"

namespace kiln::bmc::test {

constexpr const char* kPassword = "rehearsal-pass";  // test data, passed by environment

std::string mockup_path(const std::string& name);
// Loaded once per test run: the HPE tree is 11 MB.
const MockupTree& mockup(const std::string& name);

class ScratchDir {
public:
    ScratchDir();
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

std::string basic_auth(const std::string& user, const std::string& password);

BmcRequest request(const std::string& method, const std::string& path, const std::string& body = "",
                   const HeaderMap& headers = {});
nlohmann::json body_of(const BmcResponse& r);

// kiln-bmc as a child. start() returns once every BMC printed its
// "bmc <i>: <url>" line (it prints only when listening) or the child died.
class BmcChild {
public:
    BmcChild() = default;
    ~BmcChild();
    BmcChild(const BmcChild&) = delete;
    BmcChild& operator=(const BmcChild&) = delete;

    // argv after the program; env added to ours. False when the child
    // ended (or 60 s passed) before all `bmc_count` lines came.
    bool start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, int bmc_count = 1);
    // SIGTERM, then wait; returns the exit code (-signal when killed).
    int stop();

    pid_t pid() const { return pid_; }
    const std::vector<std::string>& urls() const { return urls_; }
    const std::string& url() const { return urls_.at(0); }
    std::string host_port(size_t i = 0) const;  // "127.0.0.1:43121"
    const std::string& output() const { return out_; }
    std::string errors() const;  // what it wrote to stderr

private:
    pid_t pid_ = -1;
    int out_fd_ = -1;
    std::string out_;
    std::string err_file_;
    std::vector<std::string> urls_;
    ScratchDir dir_;
};

struct ScriptResult {
    int exit_code = -1;
    std::string out, err;
    nlohmann::json json;  // stdout parsed, null when it is not JSON
};

// Runs Debian's python3 (where python3-sushy lives) on a script in tests/bmc.
ScriptResult run_python(const std::string& script, const std::vector<std::string>& args,
                        const std::string& stdin_data = "");
// Runs any program; output parsed as JSON when it is.
ScriptResult run_program(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {});

// A loopback HTTP server for SimpleUpdate images: serves `files` (path ->
// content) with 200, anything else 404, one connection at a time on its own
// thread, until destroyed. Counts the requests it answered.
class ImageServer {
public:
    explicit ImageServer(std::map<std::string, std::string> files);
    ~ImageServer();
    ImageServer(const ImageServer&) = delete;
    ImageServer& operator=(const ImageServer&) = delete;
    std::string url(const std::string& path) const;  // "http://127.0.0.1:N/path"
    int requests() const { return requests_.load(); }

private:
    void serve();
    std::map<std::string, std::string> files_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<int> requests_{0};
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// A firmware image in kiln's format with `padding` bytes of payload.
std::string kiln_image(const std::string& component, const std::string& version, size_t padding = 64);

// http_probe.py over `base_url`: one entry per request, see the script.
nlohmann::json probe(const std::string& base_url, const nlohmann::json& requests);

}  // namespace kiln::bmc::test
