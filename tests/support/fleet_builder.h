// Builds a Fleet in code for engine tests, without the TOML loader.
#pragma once

#include <string>
#include <vector>

#include "provisioner/config/fleet_config.h"

namespace kiln::test {

inline config::Fleet make_fleet(int nodes, int racks, const std::vector<std::string>& stages,
                                const config::Limits& limits = {}, int nodes_per_bmc = 1) {
    config::Fleet f;
    f.name = "test";
    f.path = "test-fleet.toml";
    f.dir = "/nonexistent";
    f.limits = limits;
    for (int r = 0; r < racks; ++r) f.racks.push_back({"r" + std::to_string(r + 1), {}, {}});
    config::Pipeline p;
    p.name = "test-node";
    p.stages = stages;
    f.pipelines[p.name] = p;
    for (int i = 0; i < nodes; ++i) {
        config::Node n;
        char name[16];
        std::snprintf(name, sizeof name, "n%03d", i + 1);
        n.name = name;
        n.rack = f.racks[static_cast<size_t>(i % racks)].name;
        n.role = "test-node";
        n.bmc.url = "https://10.0.0." + std::to_string(i / nodes_per_bmc + 1);
        f.nodes.push_back(n);
    }
    return f;
}

}  // namespace kiln::test
