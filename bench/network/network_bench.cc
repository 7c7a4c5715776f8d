// bench/network: a 64-switch, 2,048-port rail-optimised fabric (256 nodes x
// 8 NICs, 8 rails of 8 leaves, 32 ports each).
//   1. SONiC: render every switch's CONFIG_DB tables (the baseline), then
//      validate each against the YANG models; ratio validate / render.
//   2. The same fabric as NVUE and EOS leaves served by kiln-switch's
//      emulator on loopback (in this process): the engine's full plan with
//      the network stage for all 256 nodes, on fresh switches and again on
//      converged ones; baseline: reading each switch's running config once
//      (a plan reads each switch once per cabled node).
// Writes wall times and peak RSS to --out as JSON.
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "network/emulator/emulated_switch.h"
#include "network/emulator/switch_server.h"
#include "network/fabric.h"
#include "network/sonic/render.h"
#include "network/sonic/yang_validator.h"
#include "network/stage/network_stage.h"
#include "network/switch_drivers.h"
#include "network/switch_scope.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/engine.h"
#include "provisioner/engine/stage_registry.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kSwitches = 64, kPortsPerSwitch = 32, kRails = 8, kNodes = 256;

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

long peak_rss_kb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// os_of(s): the OS of switch s; address_of(s): its address.
template <class OsFn, class AddrFn>
std::string fleet_toml(OsFn os_of, AddrFn address_of) {
    std::string t = "schema = 1\n[fleet]\nname = \"bench\"\npipelines = \"pipelines\"\n";
    t += fmt::format("[limits]\nparallel = 64\n");
    for (int s = 0; s < kSwitches; ++s) {
        t += fmt::format(
            "[switches.leaf{:02}]\nos = \"{}\"\naddress = \"{}\"\nusername = \"admin\"\n"
            "password = \"env:KILN_BENCH_SWITCH_PASSWORD\"\nrail = {}\nports = [\n",
            s, os_of(s), address_of(s), s / (kSwitches / kRails));
        for (int p = 0; p < kPortsPerSwitch; ++p) {
            const std::string name = os_of(s) == "sonic"  ? fmt::format("Ethernet{}", p * 4)
                                     : os_of(s) == "nvue" ? fmt::format("swp{}", p + 1)
                                                          : fmt::format("Ethernet{}/1", p + 1);
            t += fmt::format("  {{ name = \"{}\", speed_mbps = 400000, lanes = \"{},{},{},{}\" }},\n", name, p * 4,
                             p * 4 + 1, p * 4 + 2, p * 4 + 3);
        }
        t += "]\n";
    }
    t += "[[racks]]\nname = \"r1\"\nswitches = [";
    for (int s = 0; s < kSwitches; ++s) t += fmt::format("{}\"leaf{:02}\"", s ? ", " : "", s);
    t += "]\n[network.roce]\n[defaults]\nrole = \"net\"\nnetwork = \"roce\"\nnics = [";
    for (int k = 0; k < kRails; ++k) t += fmt::format("{}\"mlx5_{}\"", k ? ", " : "", k);
    t += "]\n";
    for (int n = 0; n < kNodes; ++n) t += fmt::format("[[nodes]]\nname = \"n{:03}\"\nrack = \"r1\"\n", n);
    // NIC k of node n on rail k: leaf k*8 + n/32, port n%32.
    for (int n = 0; n < kNodes; ++n)
        for (int k = 0; k < kRails; ++k) {
            const int s = k * (kSwitches / kRails) + n / kPortsPerSwitch, p = n % kPortsPerSwitch;
            const std::string port = os_of(s) == "sonic"  ? fmt::format("Ethernet{}", p * 4)
                                     : os_of(s) == "nvue" ? fmt::format("swp{}", p + 1)
                                                          : fmt::format("Ethernet{}/1", p + 1);
            t += fmt::format(
                "[[cabling]]\nnode = \"n{:03}\"\nnic = \"mlx5_{}\"\nswitch = \"leaf{:02}\"\nport = \"{}\"\n", n, k, s,
                port);
        }
    return t;
}

kiln::config::Fleet load(const std::string& dir, const std::string& toml, double& seconds) {
    fs::create_directories(dir + "/pipelines");
    std::ofstream(dir + "/pipelines/net.toml") << "schema = 1\nname = \"net\"\nstages = [\"network\"]\n";
    std::ofstream(dir + "/fleet.toml") << toml;
    kiln::config::LoadOptions o;
    o.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
    const auto t = Clock::now();
    auto r = kiln::config::load_fleet(dir + "/fleet.toml", o);
    seconds = since(t);
    if (!r.fleet) {
        for (const auto& d : r.errors) std::cerr << d.str() << "\n";
        std::exit(1);
    }
    return std::move(*r.fleet);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln network benchmark"};
    std::string out = "bench/results/network.json", work = "build/bench-network";
    app.add_option("--out", out, "results JSON");
    app.add_option("--work", work, "scratch folder");
    CLI11_PARSE(app, argc, argv);
    ::setenv("KILN_BENCH_SWITCH_PASSWORD", "bench-pass", 1);
    json result = {
        {"benchmark", "network"}, {"switches", kSwitches}, {"ports", kSwitches * kPortsPerSwitch}, {"nodes", kNodes}};

    // 1. SONiC render + validate.
    double load_s = 0;
    auto sonic_fleet = load(
        work + "/sonic",
        fleet_toml([](int) { return std::string("sonic"); }, [](int s) { return fmt::format("10.0.0.{}", s + 1); }),
        load_s);
    result["config_load_s"] = load_s;
    auto fabric = kiln::network::build_fabric(sonic_fleet);
    if (!fabric) return std::cerr << fabric.error().str() << "\n", 1;
    auto t = Clock::now();
    std::vector<json> tables;
    for (const auto& sw : fabric->switches) {
        auto db = kiln::network::sonic::render_switch(sonic_fleet, sw);
        if (!db) return std::cerr << db.error().str() << "\n", 1;
        tables.push_back(db->json());
    }
    const double render_s = since(t);
    auto validator = kiln::network::sonic::YangValidator::load();
    if (!validator) return std::cerr << validator.error().str() << "\n", 1;
    t = Clock::now();
    size_t issues = 0;
    for (const auto& tb : tables) issues += validator->check(tb).size();
    const double validate_s = since(t);
    if (issues) return std::cerr << issues << " YANG issues in the rendered fabric\n", 1;
    result["sonic_render_s"] = render_s;
    result["sonic_validate_s"] = validate_s;
    result["sonic_render_validate_s"] = render_s + validate_s;
    result["validate_vs_render_ratio"] = validate_s / render_s;
    std::cout << fmt::format("sonic: render {:.3f} s, validate {:.3f} s for {} switches\n", render_s, validate_s,
                             kSwitches);

    // 2. The same fabric on emulated NVUE (even) and EOS (odd) leaves.
    std::vector<std::unique_ptr<kiln::network::emulator::EmulatedSwitch>> emulated;
    std::vector<std::unique_ptr<kiln::network::emulator::SwitchServer>> servers;
    std::vector<std::string> urls;
    for (int s = 0; s < kSwitches; ++s) {
        kiln::network::emulator::SwitchSpec spec;
        spec.name = fmt::format("leaf{:02}", s);
        spec.os = s % 2 ? "eos" : "nvue";
        spec.password = "bench-pass";
        auto sw = kiln::network::emulator::EmulatedSwitch::open(spec);
        if (!sw) return std::cerr << sw.error().str() << "\n", 1;
        auto server = kiln::network::emulator::SwitchServer::start({}, **sw);
        if (!server) return std::cerr << server.error().str() << "\n", 1;
        urls.push_back((*server)->url());
        emulated.push_back(std::move(*sw));
        servers.push_back(std::move(*server));
    }
    auto http_fleet = load(work + "/http",
                           fleet_toml([](int s) { return std::string(s % 2 ? "eos" : "nvue"); },
                                      [&](int s) { return urls[static_cast<size_t>(s)]; }),
                           load_s);
    auto http_fabric = kiln::network::build_fabric(http_fleet);
    if (!http_fabric) return std::cerr << http_fabric.error().str() << "\n", 1;

    kiln::network::SwitchDriverDeps deps;
    deps.http = std::make_shared<kiln::net::CurlHttpClient>();
    deps.nvue.poll_interval = std::chrono::milliseconds(5);
    auto factory = [deps](const kiln::config::Fleet& f, const kiln::config::Switch& sw) {
        return kiln::network::make_switch_driver(f, sw, deps);
    };
    kiln::engine::StageRegistry registry;
    registry.add(std::make_shared<kiln::network::NetworkStage>(factory));

    auto plan = [&](const char* label, int& actions) -> double {
        kiln::engine::StopToken stop;
        kiln::engine::Engine engine(http_fleet, registry, nullptr, nullptr, stop);
        kiln::engine::RunOptions opts;
        opts.command = "plan";
        const auto t0 = Clock::now();
        auto report = engine.plan(opts);
        const double s = since(t0);
        if (!report) {
            std::cerr << report.error().str() << "\n";
            std::exit(1);
        }
        actions = 0;
        for (const auto& e : report->entries) {
            if (e.status == "error") {
                std::cerr << e.node << ": " << e.error << "\n";
                std::exit(1);
            }
            actions += static_cast<int>(e.actions.size());
        }
        std::cout << fmt::format("plan ({}): {:.3f} s, {} actions\n", label, s, actions);
        return s;
    };

    // Baseline: one read of each switch's running config.
    t = Clock::now();
    for (const auto& sw : http_fleet.switches) {
        auto scope = kiln::network::scope_for_switch(http_fleet, *http_fabric, sw);
        auto d = factory(http_fleet, sw);
        if (!scope || !d || !(*d)->read_running(scope->ports)) return std::cerr << "baseline read failed\n", 1;
    }
    const double read_once_s = since(t);

    int fresh_actions = 0, converged_actions = 0;
    const double plan_fresh_s = plan("fresh switches", fresh_actions);
    // Converge every switch, whole, as the stage's applies would.
    t = Clock::now();
    for (const auto& sw : http_fleet.switches) {
        auto scope = kiln::network::scope_for_switch(http_fleet, *http_fabric, sw);
        auto d = factory(http_fleet, sw);
        if (!scope || !d) return std::cerr << "converge setup failed\n", 1;
        auto cmp = kiln::network::compare_switch(**d, *scope);
        if (!cmp) return std::cerr << cmp.error().str() << "\n", 1;
        if (auto st = (*d)->apply(cmp->desired, cmp->running); !st) return std::cerr << st.error().str() << "\n", 1;
    }
    const double converge_s = since(t);
    const double plan_converged_s = plan("converged switches", converged_actions);
    if (fresh_actions != kNodes * kRails || converged_actions != 0) {
        std::cerr << "unexpected plan: " << fresh_actions << " then " << converged_actions << " actions\n";
        return 1;
    }
    result["switch_read_once_s"] = read_once_s;
    result["plan_fresh_s"] = plan_fresh_s;
    result["plan_fresh_actions"] = fresh_actions;
    result["converge_all_switches_s"] = converge_s;
    result["plan_converged_s"] = plan_converged_s;
    result["plan_vs_read_once_ratio"] = plan_converged_s / read_once_s;
    result["switch_reads_per_plan"] = kNodes * kRails;
    result["peak_rss_mb"] = static_cast<double>(peak_rss_kb()) / 1024.0;
    servers.clear();
    emulated.clear();
    fs::create_directories(fs::path(out).parent_path());
    std::ofstream(out) << result.dump(2) << "\n";
    std::cout << "wrote " << out << "\n";
    return 0;
}
