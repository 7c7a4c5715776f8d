#include "network/fabric.h"

#include <set>

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
    for (const auto& s : switches)
        if (s.name == switch_name) return &s;
    return nullptr;
}

Result<Fabric> build_fabric(const config::Fleet& fleet, const std::vector<SwitchPorts>& ports) {
    Fabric fabric;
    for (const auto& sw : fleet.switches) {
        FabricSwitch fs{sw.name, sw.os, {}, {}};
        for (const auto& rack : fleet.racks)
            for (const auto& name : rack.switches)
                if (name == sw.name && fs.rack.empty()) fs.rack = rack.name;
        fabric.switches.push_back(std::move(fs));
    }

    std::set<std::string> seen_switches;
    for (const auto& sp : ports) {
        FabricSwitch* target = nullptr;
        for (auto& fs : fabric.switches)
            if (fs.name == sp.switch_name) target = &fs;
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
            if (port.peer && fleet.find_node(port.peer->node) == nullptr)
                return fabric_error("unknown-node", fmt::format("switch {}: port {}: cabled to unknown node {}",
                                                                sp.switch_name, port.name, port.peer->node));
        }
        target->ports = sp.ports;
    }
    return fabric;
}

Result<Fabric> build_fabric(const config::Fleet& fleet) {
    std::vector<SwitchPorts> all;
    for (const auto& sw : fleet.switches) {
        if (sw.ports.empty()) continue;
        SwitchPorts sp{sw.name, {}};
        for (const auto& p : sw.ports) {
            Port port;
            port.name = p.name;
            port.speed_mbps = p.speed_mbps;
            port.lanes = p.lanes;
            port.alias = p.alias;
            sp.ports.push_back(std::move(port));
        }
        all.push_back(std::move(sp));
    }
    for (const auto& c : fleet.cabling) {
        for (auto& sp : all) {
            if (sp.switch_name != c.switch_name) continue;
            for (auto& port : sp.ports)
                if (port.name == c.port) {
                    port.peer = Cable{c.node, c.nic};
                    port.cable_length_m = c.cable_length_m;
                }
        }
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

Result<const config::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const FabricSwitch& sw) {
    std::string chosen;
    std::string chosen_by;
    for (const auto& port : sw.ports) {
        if (!port.peer) continue;
        const config::Node* node = fleet.find_node(port.peer->node);
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

}  // namespace kiln::network
