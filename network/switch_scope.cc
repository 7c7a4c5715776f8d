#include "network/switch_scope.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace kiln::network {

const config::Switch* fleet_switch(const config::Fleet& fleet, const Fabric& fabric, size_t switch_index) {
    const std::string& name = fabric.switches.at(switch_index).name;
    if (switch_index < fleet.switches.size() && fleet.switches[switch_index].name == name)
        return &fleet.switches[switch_index];
    return fleet.find_switch(name);
}

Result<bool> node_has_scope(const config::Fleet& fleet, const config::Node& node) {
    const std::string& picked = node.profile(kNetworkTable);
    if (picked.empty()) return false;
    if (!network_profile(fleet, node))
        return make_error("network", "network.unknown_profile",
                          fmt::format("node {}: network profile {} is not declared", node.name, picked));
    return true;
}

Result<std::vector<ScopePorts>> scope_beyond_own_ports(const Fabric& fabric, const std::vector<size_t>& leaves) {
    // Switch index -> port indexes: the leaves' uplink ports, the ports
    // those uplinks face (on spines, or on another leaf), and above the
    // spines every core link (no node at either end) at both ends, up to
    // the top of the fabric. Ordered, so scopes come in fabric order,
    // ports in switch order.
    std::map<size_t, std::set<size_t>> wanted;
    for (size_t leaf : leaves) wanted[leaf];
    // Both ends of the uplink at (sw, port); the far switch, or an error.
    auto take_link = [&](size_t sw, size_t port) -> Result<size_t> {
        wanted[sw].insert(port);
        size_t far_sw = 0;
        const Port* far = fabric.facing(fabric.switches[sw].ports[port], &far_sw);
        if (far == nullptr)
            return make_error("network", "network.bad_uplink",
                              fmt::format("switch {}: port {}: its uplink's far port is not in the fabric",
                                          fabric.switches[sw].name, fabric.switches[sw].ports[port].name));
        wanted[far_sw].insert(static_cast<size_t>(far - fabric.switches[far_sw].ports.data()));
        return far_sw;
    };
    std::set<size_t> above;  // node-less switches reached, whose core links the node's traffic crosses
    for (size_t leaf : leaves)
        for (const PortRef& up : fabric.uplinks_of(leaf)) {
            auto far_sw = take_link(leaf, up.port);
            if (!far_sw) return far_sw.error();
            if (!fabric.switches[*far_sw].leaf) above.insert(*far_sw);
        }
    for (std::vector<size_t> frontier(above.begin(), above.end()); !frontier.empty();) {
        std::vector<size_t> next;
        for (size_t sw : frontier)
            for (const PortRef& up : fabric.uplinks_of(sw)) {
                if (!fabric.switches[sw].ports[up.port].uplink->core) continue;  // down to a leaf: its nodes' share
                auto far_sw = take_link(sw, up.port);
                if (!far_sw) return far_sw.error();
                if (above.insert(*far_sw).second) next.push_back(*far_sw);
            }
        frontier = std::move(next);
    }
    std::vector<ScopePorts> out;
    out.reserve(wanted.size());
    for (const auto& [sw, ports] : wanted) out.push_back({sw, std::vector<size_t>(ports.begin(), ports.end())});
    return out;
}

Result<std::vector<SwitchScope>> scopes_for_node(const config::Fleet& fleet, const Fabric& fabric,
                                                 const config::Node& node, const SwitchProfileFn& profile) {
    std::vector<SwitchScope> out;
    auto has = node_has_scope(fleet, node);
    if (!has) return has.error();
    if (!*has) return out;
    std::vector<size_t> leaves;
    for (const PortRef& ref : fabric.ports_of(node.name)) leaves.push_back(ref.sw);
    std::sort(leaves.begin(), leaves.end());
    leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
    auto beyond = scope_beyond_own_ports(fabric, leaves);
    if (!beyond) return beyond.error();
    for (auto& [sw, ports] : *beyond) {
        // The node's own ports on this switch (ports_of: switch then port order).
        for (const PortRef& ref : fabric.ports_of(node.name))
            if (ref.sw == sw) ports.push_back(ref.port);
        std::sort(ports.begin(), ports.end());
        ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
        SwitchScope scope;
        scope.sw = fleet_switch(fleet, fabric, sw);
        if (scope.sw == nullptr)
            return make_error("network", "network.unknown_switch",
                              fmt::format("switch {} is not in the fleet", fabric.switches[sw].name));
        // The switch carries one profile for all its nodes (a spine: its
        // leaves'): refuse a mix here rather than have two nodes rewrite
        // each other's QoS.
        auto prof = profile ? profile(sw) : profile_for_switch(fleet, fabric, fabric.switches[sw]);
        if (!prof) return prof.error();
        scope.profile = *prof;
        for (size_t p : ports) scope.ports.push_back(fabric.switches[sw].ports[p]);
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
        if (p.cabled()) scope.ports.push_back(p);
    if (scope.ports.empty()) return scope;
    auto prof = profile_for_switch(fleet, fabric, *fs);
    if (!prof) return prof.error();
    scope.profile = *prof;
    return scope;
}

Result<SwitchComparison> compare_switch(SwitchDriver& driver, const SwitchScope& scope) {
    auto state = driver.read_state();
    if (!state) return state.error();
    return compare_switch(driver, scope, *state);
}

Result<SwitchComparison> compare_switch(const SwitchDriver& driver, const SwitchScope& scope,
                                        const nlohmann::json& state) {
    SwitchComparison c;
    // Project first: what kiln renders may depend on the switch's platform.
    c.running = driver.project_running(state, scope.ports);
    auto desired = driver.render_for(*scope.profile, scope.ports, c.running);
    if (!desired) return desired.error();
    c.changes = driver.diff(*desired, c.running);
    if (!c.changes.empty())
        if (Status s = driver.check(*desired, c.running); !s) return s.error();
    c.desired = std::move(*desired);
    return c;
}

nlohmann::json change_json(const std::string& switch_name, const ConfigChange& c) {
    return {{"switch", switch_name}, {"port", c.port},       {"field", c.field},     {"path", c.path},
            {"desired", c.desired},  {"running", c.running}, {"text", c.describe()}, {"disruptive", c.disruptive}};
}

}  // namespace kiln::network
