#include "network/fabric.h"

#include <set>
#include <unordered_set>

#include <fmt/format.h>

namespace kiln::network {

namespace {

Error fabric_error(const std::string& code, std::string message) {
    return make_error("network", code, std::move(message));
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

const std::vector<PortRef>& Fabric::uplinks_of(size_t switch_index) const {
    static const std::vector<PortRef> none;
    return switch_index < uplinks_of_.size() ? uplinks_of_[switch_index] : none;
}

const Port* Fabric::facing(const Port& uplink_port, size_t* switch_index) const {
    if (!uplink_port.uplink) return nullptr;
    const FabricSwitch* far = find_switch(uplink_port.uplink->switch_name);
    if (far == nullptr) return nullptr;
    if (switch_index) *switch_index = static_cast<size_t>(far - switches.data());
    return far->find_port(uplink_port.uplink->port);
}

const config::Node* Fabric::find_node(const std::string& name) const {
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : it->second;
}

void Fabric::index(const config::Fleet& fleet) {
    switch_at_.clear();
    ports_of_.clear();
    nodes_.clear();
    uplinks_of_.assign(switches.size(), {});
    for (size_t s = 0; s < switches.size(); ++s) {
        // The first of a duplicated name wins, as the linear search did.
        switch_at_.emplace(switches[s].name, s);
        switches[s].leaf = false;
        for (size_t p = 0; p < switches[s].ports.size(); ++p) {
            if (const auto& peer = switches[s].ports[p].peer) {
                ports_of_[peer->node].push_back({s, p});
                switches[s].leaf = true;
            }
            if (switches[s].ports[p].uplink) uplinks_of_[s].push_back({s, p});
        }
    }
    for (const auto& n : fleet.nodes) nodes_.emplace(n.name, &n);
    indexed_ = true;
    // Which links are core (no node at either end) needs every switch's leaf flag.
    for (auto& sw : switches)
        for (auto& port : sw.ports)
            if (port.uplink) {
                const FabricSwitch* far = find_switch(port.uplink->switch_name);
                port.uplink->core = !sw.leaf && far != nullptr && !far->leaf;
            }
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
                "network.unknown_switch",
                fmt::format("ports given for switch {} which the fleet does not declare", sp.switch_name));
        // Two lists for one switch would be merged silently otherwise.
        if (!seen_switches.insert(sp.switch_name).second)
            return fabric_error("network.duplicate_switch",
                                fmt::format("ports for switch {} given twice", sp.switch_name));

        std::set<std::string> names;
        for (const auto& port : sp.ports) {
            if (port.name.empty())
                return fabric_error("network.bad_port", fmt::format("switch {}: a port has no name", sp.switch_name));
            if (!names.insert(port.name).second)
                return fabric_error("network.duplicate_port",
                                    fmt::format("switch {}: port {} given twice", sp.switch_name, port.name));
            if (port.speed_mbps <= 0)
                return fabric_error("network.bad_port",
                                    fmt::format("switch {}: port {}: speed must be positive, got {}", sp.switch_name,
                                                port.name, port.speed_mbps));
            if (port.peer && !nodes.count(port.peer->node))
                return fabric_error("network.unknown_node", fmt::format("switch {}: port {}: cabled to unknown node {}",
                                                                        sp.switch_name, port.name, port.peer->node));
            if (port.peer && port.uplink)
                return fabric_error("network.bad_port",
                                    fmt::format("switch {}: port {} is cabled to node {} and to switch {}",
                                                sp.switch_name, port.name, port.peer->node, port.uplink->switch_name));
            if (port.uplink && port.uplink->switch_name == sp.switch_name)
                return fabric_error(
                    "network.bad_uplink",
                    fmt::format("switch {}: port {}: an uplink to the same switch", sp.switch_name, port.name));
        }
        target->ports = sp.ports;
    }
    fabric.index(fleet);
    // Both ends of every uplink, each naming the other: a one-sided link
    // would configure one end of a cable and leave the other lossy.
    for (const auto& fs : fabric.switches)
        for (const auto& port : fs.ports) {
            if (!port.uplink) continue;
            const SwitchLink& to = *port.uplink;
            if (!fabric.find_switch(to.switch_name))
                return fabric_error(
                    "network.unknown_switch",
                    fmt::format("switch {}: port {}: uplink to switch {} which the fleet does not declare", fs.name,
                                port.name, to.switch_name));
            const Port* far = fabric.facing(port);
            if (far == nullptr)
                return fabric_error("network.bad_uplink",
                                    fmt::format("switch {}: port {}: uplink to {} {}, which has no such port", fs.name,
                                                port.name, to.switch_name, to.port));
            if (!far->uplink || far->uplink->switch_name != fs.name || far->uplink->port != port.name)
                return fabric_error("network.bad_uplink",
                                    fmt::format("switch {}: port {}: uplink to {} {}, whose port does not face it back",
                                                fs.name, port.name, to.switch_name, to.port));
        }
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
    for (const auto& u : fleet.uplinks) {
        auto a = at.find(u.switch_name + '\0' + u.port);
        auto b = at.find(u.peer_switch + '\0' + u.peer_port);
        if (a == at.end() || b == at.end()) continue;
        auto& near = all[a->second.sw].ports[a->second.port];
        auto& far = all[b->second.sw].ports[b->second.port];
        near.uplink = SwitchLink{u.peer_switch, u.peer_port};
        near.cable_length_m = u.cable_length_m;
        far.uplink = SwitchLink{u.switch_name, u.port};
        far.cable_length_m = u.cable_length_m;
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

// A profile and who chose it ("node n1"), empty when nobody names one.
struct Chosen {
    std::string profile;
    std::string by;
};

// The profile the nodes cabled to switch `sw_name` name; nodes without one
// do not count. Errors when two disagree.
template <class FindNode>
Result<Chosen> profile_of_nodes(const std::string& sw_name, const std::vector<std::string>& node_names,
                                FindNode find_node) {
    Chosen chosen;
    for (const auto& name : node_names) {
        const config::Node* node = find_node(name);
        if (node == nullptr) continue;
        const std::string& wants = node->profile(kNetworkTable);
        if (wants.empty()) continue;
        if (chosen.profile.empty()) {
            chosen = {wants, node->name};
        } else if (wants != chosen.profile) {
            // One switch carries one QoS config: mixed profiles cannot both hold.
            return fabric_error("network.profile_conflict",
                                fmt::format("switch {}: node {} wants network profile {} but node {} wants {}", sw_name,
                                            chosen.by, chosen.profile, node->name, wants));
        }
    }
    return chosen;
}

// NodesOf: switch name -> the nodes cabled to it. FarEnds: switch name ->
// the switches its uplinks reach.
template <class FindNode, class NodesOf, class FarEnds>
Result<const network::RoceProfile*> switch_profile(const config::Fleet& fleet, const std::string& sw_name,
                                                   FindNode find_node, NodesOf nodes_of, FarEnds far_ends) {
    auto chosen = profile_of_nodes(sw_name, nodes_of(sw_name), find_node);
    if (!chosen) return chosen.error();
    if (chosen->profile.empty()) {
        // A spine (or a super-spine): every hop of an uplink path carries one
        // profile, so it takes that of the nearest leaves, walking through
        // switches no node is cabled to.
        std::string leaf;
        std::set<std::string> seen{sw_name};
        std::vector<std::string> frontier{sw_name};
        while (!frontier.empty()) {
            std::vector<std::string> next;
            for (const auto& at : frontier)
                for (const auto& far : far_ends(at)) {
                    if (!seen.insert(far).second) continue;
                    const auto far_nodes = nodes_of(far);
                    if (far_nodes.empty()) {
                        next.push_back(far);
                        continue;
                    }
                    auto theirs = profile_of_nodes(far, far_nodes, find_node);
                    if (!theirs) return theirs.error();
                    if (theirs->profile.empty()) continue;
                    if (chosen->profile.empty()) {
                        chosen->profile = theirs->profile;
                        leaf = far;
                    } else if (theirs->profile != chosen->profile) {
                        return fabric_error(
                            "network.profile_conflict",
                            fmt::format("switch {}: its uplinks reach switch {} with network profile {} and switch {} "
                                        "with {}; one switch carries one profile",
                                        sw_name, leaf, chosen->profile, far, theirs->profile));
                    }
                }
            frontier = std::move(next);
        }
    }
    if (chosen->profile.empty()) {
        if (const auto* all = network_profiles(fleet); all && all->size() == 1) return &all->begin()->second;
        return fabric_error("network.no_profile",
                            fmt::format("switch {}: no cabled node, nor any switch its uplinks reach, names a network "
                                        "profile",
                                        sw_name));
    }
    const RoceProfile* p = find_network_profile(fleet, chosen->profile);
    if (!p)
        return fabric_error("network.unknown_profile",
                            fmt::format("switch {}: network profile {} is not declared", sw_name, chosen->profile));
    return p;
}

std::vector<std::string> nodes_on(const FabricSwitch& sw) {
    std::vector<std::string> out;
    for (const auto& p : sw.ports)
        if (p.peer) out.push_back(p.peer->node);
    return out;
}

std::vector<std::string> far_ends_of(const FabricSwitch& sw) {
    std::vector<std::string> out;
    for (const auto& p : sw.ports)
        if (p.uplink) out.push_back(p.uplink->switch_name);
    return out;
}

}  // namespace

Result<const network::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const FabricSwitch& sw) {
    // `sw` as given; the switches beyond it as the fleet cables them.
    auto nodes_of = [&](const std::string& name) {
        if (name == sw.name) return nodes_on(sw);
        std::vector<std::string> out;
        for (const auto& c : fleet.cabling)
            if (c.switch_name == name) out.push_back(c.node);
        return out;
    };
    auto far_ends = [&](const std::string& name) {
        if (name == sw.name) return far_ends_of(sw);
        std::vector<std::string> out;
        for (const auto& u : fleet.uplinks) {
            if (u.switch_name == name) out.push_back(u.peer_switch);
            if (u.peer_switch == name) out.push_back(u.switch_name);
        }
        return out;
    };
    return switch_profile(
        fleet, sw.name, [&](const std::string& n) { return fleet.find_node(n); }, nodes_of, far_ends);
}

Result<const network::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const Fabric& fabric,
                                                       const FabricSwitch& sw) {
    auto nodes_of = [&](const std::string& name) {
        const FabricSwitch* fs = name == sw.name ? &sw : fabric.find_switch(name);
        return fs ? nodes_on(*fs) : std::vector<std::string>{};
    };
    auto far_ends = [&](const std::string& name) {
        const FabricSwitch* fs = name == sw.name ? &sw : fabric.find_switch(name);
        return fs ? far_ends_of(*fs) : std::vector<std::string>{};
    };
    return switch_profile(
        fleet, sw.name, [&](const std::string& n) { return fabric.find_node(n); }, nodes_of, far_ends);
}

}  // namespace kiln::network
