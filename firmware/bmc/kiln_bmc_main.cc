// kiln-bmc: serves one or more emulated Redfish BMCs from a mockup tree,
// one port each, until SIGINT or SIGTERM. Prints "bmc <i>: <url> (...)" per
// BMC once its port is listening, so scripts and tests can wait on it.
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "firmware/bmc/bmc_server.h"
#include "firmware/bmc/bmc_state.h"
#include "firmware/bmc/mockup_tree.h"
#include "provisioner/core/secret.h"

namespace {

int fail(const std::string& message) {
    std::cerr << "kiln-bmc: " << message << std::endl;
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln-bmc: a Redfish BMC emulator serving mockup trees"};
    std::string mockup, state_dir, tls_cert, tls_key, bind = "127.0.0.1";
    std::string user = "admin", password_env = "KILN_BMC_PASSWORD";
    int port = -1;
    int count = 1;
    size_t session_limit = 8;
    app.add_option("--mockup", mockup, "mockup tree to serve (DIR/index.json is /redfish/v1)")->required();
    app.add_option("--port", port, "port of the first BMC; BMC i listens on port+i (0: free ports)")->required();
    app.add_option("--bmc-count", count, "how many BMCs to serve")->check(CLI::Range(1, 1024));
    app.add_option("--state-dir", state_dir, "keep each BMC's state in DIR/bmc-<i>.json (default: memory only)");
    app.add_option("--tls-cert", tls_cert, "certificate PEM: serve HTTPS")->check(CLI::ExistingFile);
    app.add_option("--tls-key", tls_key, "private key PEM for --tls-cert")->check(CLI::ExistingFile);
    app.add_option("--bind", bind, "IPv4 address to listen on");
    app.add_option("--user", user, "the BMC's user name");
    app.add_option("--password-env", password_env, "environment variable holding the BMC's password");
    app.add_option("--session-limit", session_limit, "open sessions per BMC before logins get 503")
        ->check(CLI::Range(1, 10000));
    CLI11_PARSE(app, argc, argv);

    if (port < 0 || port > 65535 || (port > 0 && port + count - 1 > 65535)) {
        return fail("--port " + std::to_string(port) + " with --bmc-count " + std::to_string(count) +
                    " leaves the port range");
    }
    if (tls_cert.empty() != tls_key.empty()) return fail("--tls-cert and --tls-key go together");
    // The password never appears on the command line (ps shows it to all).
    auto secret = kiln::Secret::parse("env:" + password_env, ".");
    if (!secret) return fail(secret.error().message);
    auto password = secret->resolve();
    if (!password || password->empty()) {
        return fail("set the BMC password in the environment variable " + password_env);
    }

    auto tree = kiln::bmc::MockupTree::load(mockup);
    if (!tree) return fail(tree.error().message);
    if (!state_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(state_dir, ec);
        if (ec) return fail("cannot create " + state_dir + ": " + ec.message());
    }

    // Block the stop signals before any server thread starts, so they
    // inherit the mask and sigwait() below receives them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    signal(SIGPIPE, SIG_IGN);

    std::vector<std::unique_ptr<kiln::bmc::BmcState>> states;
    std::vector<std::unique_ptr<kiln::bmc::BmcServer>> servers;
    for (int i = 0; i < count; ++i) {
        kiln::bmc::BmcConfig config;
        config.user = user;
        config.password = *password;
        config.session_limit = session_limit;
        if (!state_dir.empty()) config.state_file = state_dir + "/bmc-" + std::to_string(i) + ".json";
        auto state = kiln::bmc::BmcState::open(*tree, config);
        if (!state) return fail("bmc " + std::to_string(i) + ": " + state.error().message);

        kiln::bmc::BmcServerConfig server_config;
        server_config.bind_address = bind;
        server_config.port = static_cast<uint16_t>(port == 0 ? 0 : port + i);
        server_config.tls_cert_file = tls_cert;
        server_config.tls_key_file = tls_key;
        auto server = kiln::bmc::BmcServer::start(server_config, **state);
        if (!server) return fail("bmc " + std::to_string(i) + ": " + server.error().message);

        std::cout << "bmc " << i << ": " << (*server)->url() << " (mockup " << mockup << ", state "
                  << (config.state_file.empty() ? std::string("memory") : config.state_file) << ")" << std::endl;
        states.push_back(std::move(*state));
        servers.push_back(std::move(*server));
    }

    int sig = 0;
    sigwait(&stop, &sig);
    servers.clear();  // stop serving before the states go
    states.clear();
    std::cout << "kiln-bmc: stopped by signal " << sig << std::endl;
    return 0;
}
