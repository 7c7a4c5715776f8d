#include "network/switch_scope.h"

#include <fmt/format.h>

namespace kiln::network {

Result<std::vector<SwitchScope>> scopes_for_node(const config::Fleet& fleet, const Fabric& fabric,
                                                 const config::Node& node) {
    std::vector<SwitchScope> out;
    if (node.network.empty()) return out;
    auto it = fleet.network.find(node.network);
    if (it == fleet.network.end())
        return make_error("network", "unknown-profile",
                          fmt::format("node {}: network profile {} is not declared", node.name, node.network));
    for (const auto& fs : fabric.switches) {
        SwitchScope scope;
        for (const auto& p : fs.ports)
            if (p.peer && p.peer->node == node.name) scope.ports.push_back(p);
        if (scope.ports.empty()) continue;
        scope.sw = fleet.find_switch(fs.name);
        // The switch carries one profile for all its nodes: refuse a mix here
        // rather than have two nodes rewrite each other's QoS.
        auto prof = profile_for_switch(fleet, fs);
        if (!prof) return prof.error();
        scope.profile = *prof;
        out.push_back(std::move(scope));
    }
    return out;
}

Result<SwitchScope> scope_for_switch(const config::Fleet& fleet, const Fabric& fabric, const config::Switch& sw) {
    SwitchScope scope;
    scope.sw = &sw;
    const FabricSwitch* fs = fabric.find_switch(sw.name);
    if (!fs) return scope;
    for (const auto& p : fs->ports)
        if (p.peer) scope.ports.push_back(p);
    if (scope.ports.empty()) return scope;
    auto prof = profile_for_switch(fleet, *fs);
    if (!prof) return prof.error();
    scope.profile = *prof;
    return scope;
}

Result<SwitchComparison> compare_switch(SwitchDriver& driver, const SwitchScope& scope) {
    SwitchComparison c;
    // Read first: what kiln renders may depend on the switch's platform.
    auto running = driver.read_running(scope.ports);
    if (!running) return running.error();
    auto desired = driver.render_for(*scope.profile, scope.ports, *running);
    if (!desired) return desired.error();
    c.changes = driver.diff(*desired, *running);
    if (!c.changes.empty())
        if (Status s = driver.check(*desired, *running); !s) return s.error();
    c.desired = std::move(*desired);
    c.running = std::move(*running);
    return c;
}

nlohmann::json change_json(const std::string& switch_name, const ConfigChange& c) {
    return {{"switch", switch_name}, {"port", c.port},       {"field", c.field},    {"path", c.path},
            {"desired", c.desired},  {"running", c.running}, {"text", c.describe()}, {"disruptive", c.disruptive}};
}

}  // namespace kiln::network
