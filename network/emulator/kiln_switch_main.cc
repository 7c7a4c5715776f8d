// kiln-switch: emulated NVUE and EOS switches for rehearsal and tests, one
// port each, until SIGINT or SIGTERM. Prints "switch <name> (<os>): <url>"
// per switch once it listens, so scripts and tests can wait on it.
//
//   KILN_SWITCH_PASSWORD=... kiln-switch --listen 127.0.0.1:8765
//       --switch leaf-1:nvue --switch leaf-2:eos --state-dir /tmp/sw
//       --switch spine-1:eos:DCS-7280CR3-32P4 --fault leaf-2:fail-applies=1
// An eos switch's third field is its model (modelName in show version;
// the default DCS-7050CX3-32S takes tx-queue, a 7280 uc-tx-queue).
// Switch i listens on the --listen port + i (port 0: free ports). Each switch
// holds two descriptors and a thread: thousands fit once the soft
// RLIMIT_NOFILE is raised to the hard one, which kiln-switch does at start.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "network/emulator/emulated_switch.h"
#include "network/emulator/switch_server.h"
#include "provisioner/core/host_port.h"
#include "provisioner/core/secret.h"

namespace {

int fail(const std::string& message) {
    std::cerr << "kiln-switch: " << message << std::endl;
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace kiln::network::emulator;
    CLI::App app{"kiln-switch: emulated Cumulus NVUE and Arista eAPI switches"};
    std::string listen = "127.0.0.1:0", state_dir, tls_cert, tls_key, user = "admin";
    std::string password_env = "KILN_SWITCH_PASSWORD";
    std::vector<std::string> switches, faults;
    app.add_option("--listen", listen, "HOST:PORT of the first switch; switch i listens on PORT+i (0: free ports)");
    app.add_option("--switch", switches, "NAME:OS[:MODEL], OS nvue or eos, MODEL an EOS modelName (repeatable)")
        ->required();
    app.add_option("--state-dir", state_dir, "keep each switch's running config in DIR/<name>.json");
    app.add_option("--tls-cert", tls_cert, "certificate PEM: serve HTTPS")->check(CLI::ExistingFile);
    app.add_option("--tls-key", tls_key, "private key PEM for --tls-cert")->check(CLI::ExistingFile);
    app.add_option("--user", user, "the switches' user name");
    app.add_option("--password-env", password_env, "environment variable holding the switches' password");
    app.add_option("--fault", faults, "NAME:delay=MS,fail-applies=N|all (repeatable; also PUT /_emulator/faults)");
    CLI11_PARSE(app, argc, argv);

    const auto hp = kiln::parse_host_port(listen);
    if (!hp) return fail("--listen expects HOST:PORT, not " + listen);
    const std::string host = hp->host;
    const int port = hp->port;
    if (port + static_cast<int>(switches.size()) - 1 > 65535) return fail("--listen port out of range: " + listen);
    if (tls_cert.empty() != tls_key.empty()) return fail("--tls-cert and --tls-key go together");
    auto secret = kiln::Secret::parse("env:" + password_env, ".");
    if (!secret) return fail(secret.error().message);
    auto password = secret->resolve();
    if (!password || password->empty())
        return fail("set the switch password in the environment variable " + password_env);

    // Two descriptors per switch plus its clients' connections.
    if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
                         nofile.rlim_cur < 2 * switches.size() + 64)
        return fail("--switch: " + std::to_string(switches.size()) + " switches need about " +
                    std::to_string(2 * switches.size() + 64) + " file descriptors; the limit is " +
                    std::to_string(nofile.rlim_cur) + " (ulimit -n)");

    std::map<std::string, Faults> fault_by_switch;
    for (const auto& f : faults) {
        const auto c = f.find(':');
        if (c == std::string::npos) return fail("--fault expects NAME:SPEC, got " + f);
        auto parsed = parse_faults(f.substr(c + 1));
        if (!parsed) return fail(parsed.error().message);
        fault_by_switch[f.substr(0, c)] = *parsed;
    }
    if (!state_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(state_dir, ec);
        if (ec) return fail("cannot create " + state_dir + ": " + ec.message());
    }

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    signal(SIGPIPE, SIG_IGN);

    std::vector<std::unique_ptr<EmulatedSwitch>> emulated;
    std::vector<std::unique_ptr<SwitchServer>> servers;
    for (size_t i = 0; i < switches.size(); ++i) {
        const auto c = switches[i].find(':');
        if (c == std::string::npos || c == 0) return fail("--switch expects NAME:OS[:MODEL], got " + switches[i]);
        SwitchSpec spec;
        spec.name = switches[i].substr(0, c);
        spec.os = switches[i].substr(c + 1);
        if (const auto m = spec.os.find(':'); m != std::string::npos) {
            spec.model = spec.os.substr(m + 1);
            spec.os.erase(m);
        }
        spec.user = user;
        spec.password = *password;
        if (!state_dir.empty()) spec.state_file = state_dir + "/" + spec.name + ".json";
        if (auto it = fault_by_switch.find(spec.name); it != fault_by_switch.end()) spec.faults = it->second;
        auto sw = EmulatedSwitch::open(spec);
        if (!sw) return fail(sw.error().message);
        SwitchServerConfig sc;
        sc.bind_address = host;
        sc.port = static_cast<uint16_t>(port == 0 ? 0 : port + static_cast<int>(i));
        sc.tls_cert_file = tls_cert;
        sc.tls_key_file = tls_key;
        auto server = SwitchServer::start(sc, **sw);
        if (!server) return fail(spec.name + ": " + server.error().message);
        std::cout << "switch " << spec.name << " (" << spec.os << "): " << (*server)->url() << std::endl;
        emulated.push_back(std::move(*sw));
        servers.push_back(std::move(*server));
    }
    int sig = 0;
    sigwait(&stop, &sig);
    servers.clear();
    emulated.clear();
    std::cout << "kiln-switch: stopped by signal " << sig << std::endl;
    return 0;
}
