// Helpers for the fabric, driver and stage tests: fleets written as TOML
// with switches, ports and cabling, and emulated switches served in-process
// on loopback.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "network/emulator/emulated_switch.h"
#include "network/emulator/switch_server.h"
#include "network/stage/network_config.h"
#include "provisioner/config/fleet_loader.h"
#include "tests/support/temp_dir.h"

namespace kiln::test::fabric {

inline const char* kPasswordEnv = "KILN_TEST_SWITCH_PASSWORD";
inline const char* kPassword = "sw-test-pass";

struct SwitchDecl {
    std::string name;
    std::string os;
    std::string address;
    std::vector<std::string> ports;
    bool spine = false;  // no node cabled to it: reached by [[uplinks]] only
    int first_node = 1;  // port 0 is cabled to n<first_node>, port 1 to the next, ...
    int cabled = -1;     // how many ports are cabled to nodes; -1 = as many as fit
};

// A fleet: one rack, the given switches, `nodes` nodes named n1..nN with
// NIC mlx5_k cabled to port i-first_node of switch k (unless it is a spine,
// or past `cabled`). Pipeline "net" runs only the network stage.
inline std::string fleet_toml(const std::vector<SwitchDecl>& switches, int nodes, const std::string& extra = "") {
    std::string t = "schema = 1\n[fleet]\nname = \"fab\"\npipelines = \"pipelines\"\n";
    std::string rack_switches;
    for (const auto& s : switches) {
        t += fmt::format("[switches.{}]\nos = \"{}\"\naddress = \"{}\"\nusername = \"admin\"\npassword = \"env:{}\"\n",
                         s.name, s.os, s.address, kPasswordEnv);
        t += "ports = [";
        for (size_t i = 0; i < s.ports.size(); ++i)
            t += fmt::format("{}{{ name = \"{}\", speed_mbps = 400000, lanes = \"{},{},{},{}\" }}", i ? ", " : "",
                             s.ports[i], i * 4, i * 4 + 1, i * 4 + 2, i * 4 + 3);
        t += "]\n";
        rack_switches += (rack_switches.empty() ? "\"" : ", \"") + s.name + "\"";
    }
    t += "[[racks]]\nname = \"r1\"\nswitches = [" + rack_switches + "]\n";
    t += "[network.roce]\n";
    t += extra;
    std::string nics;
    for (size_t k = 0; k < switches.size(); ++k)
        if (!switches[k].spine) nics += fmt::format("{}\"mlx5_{}\"", nics.empty() ? "" : ", ", k);
    t += "[defaults]\nrole = \"net\"\nnetwork = \"roce\"\nnics = [" + nics + "]\n";
    for (int n = 1; n <= nodes; ++n) t += fmt::format("[[nodes]]\nname = \"n{}\"\nrack = \"r1\"\n", n);
    for (size_t k = 0; k < switches.size(); ++k) {
        const auto& s = switches[k];
        if (s.spine) continue;
        const int count = s.cabled < 0 ? static_cast<int>(s.ports.size()) : s.cabled;
        for (int i = 0; i < count && i < static_cast<int>(s.ports.size()) && s.first_node + i <= nodes; ++i)
            t += fmt::format("[[cabling]]\nnode = \"n{}\"\nnic = \"mlx5_{}\"\nswitch = \"{}\"\nport = \"{}\"\n",
                             s.first_node + i, k, s.name, s.ports[static_cast<size_t>(i)]);
    }
    return t;
}

// An [[uplinks]] table: switch port -> peer switch port, with `extra` keys.
inline std::string uplink_toml(const std::string& sw, const std::string& port, const std::string& peer_sw,
                               const std::string& peer_port, const std::string& extra = "") {
    return fmt::format("[[uplinks]]\nswitch = \"{}\"\nport = \"{}\"\npeer_switch = \"{}\"\npeer_port = \"{}\"\n{}", sw,
                       port, peer_sw, peer_port, extra);
}

struct FleetFile {
    TempDir dir;
    std::string path;
    config::LoadResult loaded;

    std::string errors() const {
        std::string all;
        for (const auto& d : loaded.errors) all += d.str() + "\n";
        return all;
    }
};

inline std::unique_ptr<FleetFile> write_fleet(const std::string& toml) {
    auto f = std::make_unique<FleetFile>();
    f->dir.write("pipelines/net.toml", "schema = 1\nname = \"net\"\nstages = [\"network\"]\n");
    f->path = f->dir.write("fleet.toml", toml);
    config::LoadOptions o;
    o.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
    o.tables = {network::network_table()};
    f->loaded = config::load_fleet(f->path, o);
    return f;
}

// Emulated switches on loopback, in this process.
class Emulators {
public:
    Emulators() { ::setenv(kPasswordEnv, kPassword, 1); }

    // Starts one; returns its base URL ("http://127.0.0.1:PORT"). `model`:
    // an EOS modelName ("" = the emulator's non-VOQ default).
    std::string start(const std::string& name, const std::string& os, const std::string& state_file = "",
                      const std::string& model = "") {
        network::emulator::SwitchSpec spec;
        spec.name = name;
        spec.os = os;
        spec.model = model;
        spec.password = kPassword;
        spec.state_file = state_file;
        auto sw = network::emulator::EmulatedSwitch::open(spec);
        if (!sw) throw std::runtime_error(sw.error().message);
        auto server = network::emulator::SwitchServer::start({}, **sw);
        if (!server) throw std::runtime_error(server.error().message);
        std::string url = (*server)->url();
        switches_.push_back(std::move(*sw));
        servers_.push_back(std::move(*server));
        return url;
    }

    network::emulator::EmulatedSwitch& get(const std::string& name) {
        for (auto& s : switches_)
            if (s->name() == name) return *s;
        throw std::runtime_error("no emulated switch " + name);
    }

    ~Emulators() {
        servers_.clear();
        switches_.clear();
    }

private:
    std::vector<std::unique_ptr<network::emulator::EmulatedSwitch>> switches_;
    std::vector<std::unique_ptr<network::emulator::SwitchServer>> servers_;
};

}  // namespace kiln::test::fabric
