#include "network/fabric.h"

#include <set>
#include <unordered_set>

#include <fmt/format.h>

namespace kiln::network {

namespace {

Error fabric_error(std::string code, std::string message) {
    return make_error("network", std::move(code), std::move(message));
}

}  // namespace

const Port* FabricSwitch::find_port(const std::string& port_name) const {
    for (const auto& p : ports)
        if (p.name == port_name) return &p;
    return nullptr;
}

const FabricSwitch* Fabric::find_switch(const std::string& switch_name) const {
    if (indexed_) {
        auto it = switch_at_.find(switch_name);
        return it == switch_at_.end() ? nullptr : &switches[it->second];
    }
    for (const auto& s : switches)
        if (s.name == switch_name) return &s;
    return nullptr;
}

const std::vector<PortRef>& Fabric::ports_of(const std::string& node) const {
    static const std::vector<PortRef> none;
    auto it = ports_of_.find(node);
    return it == ports_of_.end() ? none : it->second;
}

const config::Node* Fabric::find_node(const std::string& name) const {
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : it->second;
}

void Fabric::index(const config::Fleet& fleet) {
    switch_at_.clear();
    ports_of_.clear();
    nodes_.clear();
    for (size_t s = 0; s < switches.size(); ++s) {
        // The first of a duplicated name wins, as the linear search did.
        switch_at_.emplace(switches[s].name, s);
        for (size_t p = 0; p < switches[s].ports.size(); ++p)
            if (const auto& peer = switches[s].ports[p].peer) ports_of_[peer->node].push_back({s, p});
    }
    for (const auto& n : fleet.nodes) nodes_.emplace(n.name, &n);
    indexed_ = true;
}

Result<Fabric> build_fabric(const config::Fleet& fleet, const std::vector<SwitchPorts>& ports) {
    Fabric fabric;
    std::unordered_map<std::string, std::string> rack_of;  // switch -> first rack listing it
    for (const auto& rack : fleet.racks)
        for (const auto& name : rack.switches) rack_of.emplace(name, rack.name);
    std::unordered_map<std::string, size_t> at;
    for (const auto& sw : fleet.switches) {
        FabricSwitch fs{sw.name, sw.os, {}, {}};
        if (auto it = rack_of.find(sw.name); it != rack_of.end()) fs.rack = it->second;
        at.emplace(sw.name, fabric.switches.size());
        fabric.switches.push_back(std::move(fs));
    }
    std::unordered_set<std::string> nodes;
    for (const auto& n : fleet.nodes) nodes.insert(n.name);

    std::set<std::string> seen_switches;
    for (const auto& sp : ports) {
        FabricSwitch* target = nullptr;
        if (auto it = at.find(sp.switch_name); it != at.end()) target = &fabric.switches[it->second];
        if (target == nullptr)
            return fabric_error(
                "unknown-switch",
                fmt::format("ports given for switch {} which the fleet does not declare", sp.switch_name));
        // Two lists for one switch would be merged silently otherwise.
        if (!seen_switches.insert(sp.switch_name).second)
            return fabric_error("duplicate-switch", fmt::format("ports for switch {} given twice", sp.switch_name));

        std::set<std::string> names;
        for (const auto& port : sp.ports) {
            if (port.name.empty())
                return fabric_error("bad-port", fmt::format("switch {}: a port has no name", sp.switch_name));
            if (!names.insert(port.name).second)
                return fabric_error("duplicate-port",
                                    fmt::format("switch {}: port {} given twice", sp.switch_name, port.name));
            if (port.speed_mbps <= 0)
                return fabric_error("bad-port", fmt::format("switch {}: port {}: speed must be positive, got {}",
                                                            sp.switch_name, port.name, port.speed_mbps));
            if (port.peer && !nodes.count(port.peer->node))
                return fabric_error("unknown-node", fmt::format("switch {}: port {}: cabled to unknown node {}",
                                                                sp.switch_name, port.name, port.peer->node));
        }
        target->ports = sp.ports;
    }
    fabric.index(fleet);
    return fabric;
}

Result<Fabric> build_fabric(const config::Fleet& fleet) {
    std::vector<SwitchPorts> all;
    // "switch\0port" -> its place in `all`, for the cabling below.
    std::unordered_map<std::string, PortRef> at;
    for (const auto& sw : fleet.switches) {
        if (sw.ports.empty()) continue;
        SwitchPorts sp{sw.name, {}};
        for (const auto& p : sw.ports) {
            Port port;
            port.name = p.name;
            port.speed_mbps = p.speed_mbps;
            port.lanes = p.lanes;
            port.alias = p.alias;
            // The first of a duplicated port takes the cable; build_fabric refuses the duplicate.
            at.emplace(sw.name + '\0' + p.name, PortRef{all.size(), sp.ports.size()});
            sp.ports.push_back(std::move(port));
        }
        all.push_back(std::move(sp));
    }
    for (const auto& c : fleet.cabling) {
        auto it = at.find(c.switch_name + '\0' + c.port);
        if (it == at.end()) continue;
        auto& port = all[it->second.sw].ports[it->second.port];
        port.peer = Cable{c.node, c.nic};
        port.cable_length_m = c.cable_length_m;
    }
    return build_fabric(fleet, all);
}

std::vector<Port> make_ports(int count, int speed_mbps, int lanes_per_port) {
    std::vector<Port> out;
    out.reserve(static_cast<size_t>(count > 0 ? count : 0));
    for (int i = 0; i < count; ++i) {
        const int first = i * lanes_per_port;
        std::string lanes;
        for (int l = 0; l < lanes_per_port; ++l) lanes += (l ? "," : "") + std::to_string(first + l);
        Port p;
        p.name = "Ethernet" + std::to_string(first);
        p.speed_mbps = speed_mbps;
        p.lanes = std::move(lanes);
        out.push_back(std::move(p));
    }
    return out;
}

namespace {

template <class FindNode>
Result<const config::RoceProfile*> switch_profile(const config::Fleet& fleet, const FabricSwitch& sw,
                                                  FindNode find_node) {
    std::string chosen;
    std::string chosen_by;
    for (const auto& port : sw.ports) {
        if (!port.peer) continue;
        const config::Node* node = find_node(port.peer->node);
        if (node == nullptr || node->network.empty()) continue;
        if (chosen.empty()) {
            chosen = node->network;
            chosen_by = node->name;
        } else if (node->network != chosen) {
            // One switch carries one QoS config: mixed profiles cannot both hold.
            return fabric_error("profile-conflict",
                                fmt::format("switch {}: node {} wants network profile {} but node {} wants {}", sw.name,
                                            chosen_by, chosen, node->name, node->network));
        }
    }
    if (chosen.empty()) {
        if (fleet.network.size() == 1) return &fleet.network.begin()->second;
        return fabric_error("no-profile", fmt::format("switch {}: no cabled node names a network profile", sw.name));
    }
    auto it = fleet.network.find(chosen);
    if (it == fleet.network.end())
        return fabric_error("unknown-profile",
                            fmt::format("switch {}: network profile {} is not declared", sw.name, chosen));
    return &it->second;
}

}  // namespace

Result<const config::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const FabricSwitch& sw) {
    return switch_profile(fleet, sw, [&](const std::string& n) { return fleet.find_node(n); });
}

Result<const config::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const Fabric& fabric,
                                                      const FabricSwitch& sw) {
    return switch_profile(fleet, sw, [&](const std::string& n) { return fabric.find_node(n); });
}

}  // namespace kiln::network
