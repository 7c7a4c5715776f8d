// Shared helpers for the network tests: a small fleet and a rendered fabric.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "network/fabric.h"
#include "network/stage/network_config.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::test::network {

inline kiln::network::RoceProfile roce_profile() {
    kiln::network::RoceProfile p;
    p.name = "roce";
    return p;
}

// Two racks, one SONiC leaf each, `nodes_per_rack` nodes with one NIC each.
inline kiln::config::Fleet small_fleet(int nodes_per_rack = 2) {
    kiln::config::Fleet f;
    f.name = "net-test";
    kiln::network::add_network_profile(f, roce_profile());
    for (int r = 1; r <= 2; ++r) {
        const std::string rack = "r" + std::to_string(r);
        const std::string leaf = "leaf" + std::to_string(r);
        f.racks.push_back({rack, {leaf}, {}});
        kiln::config::Switch sw;
        sw.name = leaf;
        sw.os = "sonic";
        sw.address = "10.1.0." + std::to_string(r);
        f.switches.push_back(sw);
        for (int n = 1; n <= nodes_per_rack; ++n) {
            kiln::config::Node node;
            node.name = rack + "n" + std::to_string(n);
            node.rack = rack;
            node.set_profile(kiln::network::kNetworkTable, "roce");
            f.nodes.push_back(node);
        }
    }
    return f;
}

// `count` ports, the first ones cabled to nodes <rack>n1, <rack>n2, ...
inline std::vector<kiln::network::Port> cabled_ports(int count, const std::string& rack, int cabled) {
    auto ports = kiln::network::make_ports(count);
    for (int i = 0; i < cabled && i < count; ++i)
        ports[static_cast<size_t>(i)].peer = kiln::network::Cable{rack + "n" + std::to_string(i + 1), "mlx5_0"};
    return ports;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace kiln::test::network
