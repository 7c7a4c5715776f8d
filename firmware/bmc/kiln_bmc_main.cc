// kiln-bmc: serves one or more emulated Redfish BMCs from a mockup tree,
// one port each, until SIGINT or SIGTERM. Prints "bmc <i>: <url> (...)" per
// BMC once its port is listening, so scripts and tests can wait on it.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "firmware/bmc/bmc_server.h"
#include "firmware/bmc/bmc_state.h"
#include "firmware/bmc/libvirt_power.h"
#include "firmware/bmc/mockup_tree.h"
#include "firmware/bmc/tls_certificate.h"
#include "provisioner/core/host_port.h"
#include "provisioner/core/secret.h"
#include "provisioner/net/mhd_event_loop.h"

namespace {

int fail(const std::string& message) {
    std::cerr << "kiln-bmc: " << message << std::endl;
    return 1;
}

// BMCs one process serves; a thread serves up to kDefaultMaxThreads of them
// each on its own thread, then they share (provisioner/net/mhd_event_loop.h).
constexpr int kMaxBmcs = 10000;
constexpr int kDefaultMaxThreads = 64;

// Each BMC holds a listening socket and MHD's epoll descriptor, plus its
// clients' connections: raise the soft limit to the hard one, and refuse a
// count the hard limit cannot cover rather than fail at BMC 1,000-odd.
kiln::Status raise_open_files(int count) {
    const rlim_t needed = static_cast<rlim_t>(count) * 3 + 64;  // listener, epoll, one client
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return kiln::ok_status();
    if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &lim);
        (void)getrlimit(RLIMIT_NOFILE, &lim);
    }
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed)
        return kiln::make_error("bmc", "bmc.open_files",
                                "--bmc-count " + std::to_string(count) + " needs about " + std::to_string(needed) +
                                    " open files and the limit is " + std::to_string(lim.rlim_cur) +
                                    " (ulimit -Hn): serve fewer BMCs per process");
    return kiln::ok_status();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln-bmc: a Redfish BMC emulator serving mockup trees"};
    std::string mockup, state_dir, tls_cert, tls_key, bind = "127.0.0.1";
    std::string user = "admin", password_env = "KILN_BMC_PASSWORD";
    int port = -1;
    int count = 1;
    int threads = 0;
    size_t session_limit = 8;
    std::string listen, state_file, spool_dir, image_ca;
    double task_seconds = 5, restart_seconds = 1, post_seconds = 0, reset_task_seconds = 0, media_task_seconds = 0,
           image_timeout = 300;
    size_t image_max_bytes = size_t(1) << 30;
    bool image_insecure = false;
    kiln::bmc::FaultSettings faults;
    std::string libvirt_domain, libvirt_uri = "qemu:///system";
    app.add_option("--mockup", mockup, "mockup tree to serve (DIR/index.json is /redfish/v1)")->required();
    app.add_option("--port", port, "port of the first BMC; BMC i listens on port+i (0: free ports)");
    app.add_option("--listen", listen, "HOST:PORT: --bind HOST --port PORT in one");
    app.add_option("--state", state_file, "state file of a single BMC (--bmc-count 1)");
    app.add_option("--task-seconds", task_seconds, "how long an update task runs once its image is in")
        ->check(CLI::Range(0.0, 86400.0));
    app.add_option("--post-seconds", post_seconds,
                   "how long a host reset's POST takes: BIOS settings apply when it ends (default 0: at the reset)")
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--reset-task-seconds", reset_task_seconds,
                   "a ComputerSystem.Reset answers 202 with a task that runs this long (default 0: 204, no task)")
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--media-task-seconds", media_task_seconds,
                   "VirtualMedia InsertMedia/EjectMedia and a PATCH of a VirtualMedia or ComputerSystem answer 202 "
                   "with a task that runs this long (default 0: 204/200, no task)")
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--restart-seconds", restart_seconds, "how long an emulated BMC restart answers 503")
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--image-max-bytes", image_max_bytes, "largest firmware image accepted");
    app.add_option("--image-timeout", image_timeout, "seconds a SimpleUpdate download may take")
        ->check(CLI::Range(0.1, 86400.0));
    app.add_option("--image-ca", image_ca, "CA bundle for https ImageURIs")->check(CLI::ExistingFile);
    app.add_flag("--image-insecure", image_insecure, "do not verify https ImageURIs");
    app.add_option("--spool-dir", spool_dir, "where images are written while checked (default: state dir, else temp)");
    app.add_option("--fault-latency-ms", faults.latency_ms, "every Redfish request waits this long first")
        ->check(CLI::Range(0u, 3600000u));
    app.add_option("--fault-unavailable", faults.unavailable_requests, "the next N Redfish requests get 503");
    app.add_option("--fault-retry-after", faults.retry_after_s, "Retry-After of those 503s, seconds")
        ->check(CLI::Range(0u, 3600000u));
    app.add_option("--fault-drop", faults.drop_connections, "the next N Redfish requests get their connection closed");
    app.add_option("--fault-fail-tasks", faults.fail_tasks, "the next N update tasks end in Exception");
    app.add_option("--fault-restart-mid-update", faults.restart_mid_update,
                   "the next N update tasks restart the BMC half way");
    app.add_option("--fault-purge-tasks", faults.purge_tasks,
                   "the next N update tasks vanish (404) once a client polled them");
    std::string vendor;
    app.add_option("--vendor", vendor,
                   "serve as this vendor's BMC: dell, hpe, supermicro, lenovo, openbmc, ami, "
                   "generic (default: read from the tree)")
        ->check(CLI::IsMember({"dell", "hpe", "supermicro", "lenovo", "openbmc", "ami", "generic"}));
    std::vector<int> fault_bmcs;
    app.add_option("--fault-bmcs", fault_bmcs, "the --fault-* flags apply to these BMC indexes only (default: all)")
        ->delimiter(',');
    app.add_option("--libvirt-domain", libvirt_domain, "power and Reset act on this libvirt domain");
    app.add_option("--libvirt-uri", libvirt_uri, "libvirt connection URI for --libvirt-domain");
    app.add_option("--bmc-count", count, "how many BMCs to serve")->check(CLI::Range(1, kMaxBmcs));
    app.add_option("--threads", threads,
                   "threads serving the BMCs (default: one per BMC up to 64); a BMC shares its thread with others "
                   "past that, so a --fault-latency-ms request holds those too")
        ->check(CLI::Range(1, 1024));
    app.add_option("--state-dir", state_dir, "keep each BMC's state in DIR/bmc-<i>.json (default: memory only)");
    app.add_option("--tls-cert", tls_cert, "certificate PEM: serve HTTPS")->check(CLI::ExistingFile);
    app.add_option("--tls-key", tls_key, "private key PEM for --tls-cert")->check(CLI::ExistingFile);
    std::string tls_generate;
    app.add_option("--tls-generate", tls_generate,
                   "serve HTTPS with a self-signed certificate kept in DIR (made at the first start)");
    app.add_option("--bind", bind, "IPv4 address to listen on");
    app.add_option("--user", user, "the BMC's user name");
    app.add_option("--password-env", password_env, "environment variable holding the BMC's password");
    app.add_option("--session-limit", session_limit, "open sessions per BMC before logins get 503")
        ->check(CLI::Range(1, 10000));
    CLI11_PARSE(app, argc, argv);

    if (!listen.empty()) {
        const auto hp = kiln::parse_host_port(listen);
        if (!hp) return fail("--listen wants HOST:PORT, not " + listen);
        bind = hp->host;
        port = hp->port;
    }
    if (port < 0 && listen.empty()) return fail("give --port or --listen");
    if (!state_file.empty() && (count != 1 || !state_dir.empty())) {
        return fail("--state is for one BMC; use --state-dir with --bmc-count");
    }
    if (!libvirt_domain.empty() && count != 1) return fail("--libvirt-domain backs one BMC: use --bmc-count 1");
    if (port < 0 || port > 65535 || (port > 0 && port + count - 1 > 65535)) {
        return fail("--port " + std::to_string(port) + " with --bmc-count " + std::to_string(count) +
                    " leaves the port range");
    }
    if (tls_cert.empty() != tls_key.empty()) return fail("--tls-cert and --tls-key go together");
    std::string fingerprint;
    if (!tls_generate.empty()) {
        if (!tls_cert.empty()) return fail("--tls-generate and --tls-cert exclude each other");
        auto files = kiln::bmc::ensure_self_signed(tls_generate, bind);
        if (!files) return fail(files.error().message);
        tls_cert = files->cert_file;
        tls_key = files->key_file;
        fingerprint = files->fingerprint;
    }
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
    if (spool_dir.empty()) {
        if (!state_dir.empty())
            spool_dir = state_dir;
        else if (!state_file.empty())
            spool_dir = std::filesystem::path(state_file).parent_path().string();
        if (spool_dir.empty()) spool_dir = std::filesystem::temp_directory_path().string();
    }
    std::shared_ptr<kiln::bmc::PowerBackend> power;
    if (!libvirt_domain.empty()) {
        auto backend = kiln::bmc::LibvirtPower::connect(libvirt_uri, libvirt_domain);
        if (!backend) return fail(backend.error().message);
        power = std::move(*backend);
    }

    // Block the stop signals before any server thread starts, so they
    // inherit the mask and sigwait() below receives them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    signal(SIGPIPE, SIG_IGN);

    if (auto files = raise_open_files(count); !files) return fail(files.error().message);
    auto loop = kiln::net::MhdEventLoop::start(threads > 0 ? threads : std::min(count, kDefaultMaxThreads));
    if (!loop) return fail(loop.error().message);

    // One template for every BMC: they share the tree's bodies.
    const auto base =
        kiln::bmc::BmcState::prepare(*tree, vendor.empty() ? std::nullopt : kiln::bmc::vendor_mode_from_name(vendor));
    std::vector<std::unique_ptr<kiln::bmc::BmcState>> states;
    std::vector<std::unique_ptr<kiln::bmc::BmcServer>> servers;
    for (int i = 0; i < count; ++i) {
        kiln::bmc::BmcConfig config;
        config.user = user;
        config.password = *password;
        config.session_limit = session_limit;
        if (!state_dir.empty()) config.state_file = state_dir + "/bmc-" + std::to_string(i) + ".json";
        if (!state_file.empty()) config.state_file = state_file;
        config.task_seconds = task_seconds;
        config.restart_seconds = restart_seconds;
        config.post_seconds = post_seconds;
        config.reset_task_seconds = reset_task_seconds;
        config.media_task_seconds = media_task_seconds;
        config.download.timeout = std::chrono::milliseconds(static_cast<long long>(image_timeout * 1000));
        config.download.max_bytes = image_max_bytes;
        config.download.spool_dir = spool_dir;
        config.download.ca_bundle = image_ca;
        config.download.verify_tls = !image_insecure;
        if (fault_bmcs.empty() || std::find(fault_bmcs.begin(), fault_bmcs.end(), i) != fault_bmcs.end()) {
            config.faults = faults;
        }
        config.power = power;
        auto state = kiln::bmc::BmcState::open(*base, config);
        if (!state) return fail("bmc " + std::to_string(i) + ": " + state.error().message);

        kiln::bmc::BmcServerConfig server_config;
        server_config.bind_address = bind;
        server_config.port = static_cast<uint16_t>(port == 0 ? 0 : port + i);
        server_config.tls_cert_file = tls_cert;
        server_config.tls_key_file = tls_key;
        server_config.loop = loop->get();
        auto server = kiln::bmc::BmcServer::start(server_config, **state);
        if (!server) return fail("bmc " + std::to_string(i) + ": " + server.error().message);

        std::cout << "bmc " << i << ": " << (*server)->url() << " (mockup " << mockup << ", state "
                  << (config.state_file.empty() ? std::string("memory") : config.state_file)
                  << (power ? ", power " + power->describe() : std::string())
                  << (fingerprint.empty() ? std::string() : ", sha256 " + fingerprint) << ")" << std::endl;
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
