#include "provisioner/config/fleet_config.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::config {

std::string SourcePos::str() const {
    return fmt::format("{}:{}:{}", file, line, column);
}

Duration Limits::timeout_for(const std::string& stage) const {
    auto it = stage_timeouts.find(stage);
    return it == stage_timeouts.end() ? default_timeout : it->second;
}

namespace {

// The element named `name`: through the index when it still matches the
// vector (built at this size, and the entry names it), linearly otherwise.
// A name the fleet lacks scans too: lookups of unknown names are errors,
// off the hot path.
template <typename T>
const T* find_named(const std::vector<T>& items, const std::unordered_map<std::string, size_t>& index,
                    size_t indexed_size, const std::string& name) {
    if (indexed_size == items.size()) {
        auto it = index.find(name);
        if (it != index.end() && it->second < items.size() && items[it->second].name == name) return &items[it->second];
    }
    // Not indexed, or renamed since (tests edit fleets in place): a miss
    // scans, so an index never hides an element.
    for (const auto& x : items)
        if (x.name == name) return &x;
    return nullptr;
}

template <typename T>
void index_named(const std::vector<T>& items, std::unordered_map<std::string, size_t>& index) {
    index.clear();
    index.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) index.emplace(items[i].name, i);  // the first of a name wins
}

}  // namespace

const Node* Fleet::find_node(const std::string& name) const {
    return find_named(nodes, node_at_, nodes_indexed_, name);
}

const Rack* Fleet::find_rack(const std::string& name) const {
    return find_named(racks, rack_at_, racks_indexed_, name);
}

const Switch* Fleet::find_switch(const std::string& name) const {
    return find_named(switches, switch_at_, switches_indexed_, name);
}

const SwitchPort* Switch::find_port(const std::string& port_name) const {
    return find_named(ports, port_index, port_index.size() == ports.size() ? ports.size() : static_cast<size_t>(-1),
                      port_name);
}

const NodeNic* Node::find_nic(const std::string& nic_name) const {
    for (const auto& n : nics)
        if (n.name == nic_name) return &n;
    return nullptr;
}

const std::string& Node::profile(std::string_view node_key) const {
    static const std::string none;
    for (const auto& [key, name] : profiles)
        if (key == node_key) return name;
    return none;
}

void Node::set_profile(const std::string& node_key, const std::string& name) {
    for (auto& [key, value] : profiles)
        if (key == node_key) {
            value = name;
            return;
        }
    profiles.emplace_back(node_key, name);
}

std::string HostAccess::describe() const {
    if (mode == "local") return "local";
    if (mode == "netns") return "netns " + netns;
    if (mode == "ssh") return "ssh " + (username.empty() ? "" : username + "@") + address;
    return "not managed";
}

std::vector<const Node*> Fleet::nodes_picking(const std::string& node_key, const std::string& name,
                                              const std::string* rack) const {
    std::vector<const Node*> out;
    auto picks = [&](const Node& n) { return n.profile(node_key) == name && (!rack || n.rack == *rack); };
    if (nodes_indexed_ == nodes.size() && picks_indexed_.count(node_key)) {
        const auto& index = rack ? picks_by_rack_ : picks_by_fleet_;
        const std::string key = node_key + "\n" + name + (rack ? "\n" + *rack : std::string());
        if (auto it = index.find(key); it != index.end())
            for (size_t k : it->second)
                if (k < nodes.size() && picks(nodes[k])) out.push_back(&nodes[k]);
        return out;
    }
    for (const auto& n : nodes)
        if (picks(n)) out.push_back(&n);
    return out;
}

std::vector<const Cable*> Fleet::cables_of(const std::string& node) const {
    std::vector<const Cable*> out;
    if (cables_indexed_ == cabling.size()) {
        if (auto it = cables_by_node_.find(node); it != cables_by_node_.end())
            for (size_t i : it->second)
                if (i < cabling.size() && cabling[i].node == node) out.push_back(&cabling[i]);
        return out;
    }
    for (const auto& c : cabling)
        if (c.node == node) out.push_back(&c);
    return out;
}

std::vector<const Uplink*> Fleet::uplinks_of(const std::string& switch_name) const {
    std::vector<const Uplink*> out;
    auto at_either_end = [&](const Uplink& u) { return u.switch_name == switch_name || u.peer_switch == switch_name; };
    if (uplinks_indexed_ == uplinks.size()) {
        if (auto it = uplinks_by_switch_.find(switch_name); it != uplinks_by_switch_.end())
            for (size_t i : it->second)
                if (i < uplinks.size() && at_either_end(uplinks[i])) out.push_back(&uplinks[i]);
        return out;
    }
    for (const auto& u : uplinks)
        if (at_either_end(u)) out.push_back(&u);
    return out;
}

void Fleet::index() {
    cables_by_node_.clear();
    for (size_t i = 0; i < cabling.size(); ++i) cables_by_node_[cabling[i].node].push_back(i);
    cables_indexed_ = cabling.size();
    uplinks_by_switch_.clear();
    for (size_t i = 0; i < uplinks.size(); ++i) {
        uplinks_by_switch_[uplinks[i].switch_name].push_back(i);
        if (uplinks[i].peer_switch != uplinks[i].switch_name) uplinks_by_switch_[uplinks[i].peer_switch].push_back(i);
    }
    uplinks_indexed_ = uplinks.size();
    index_named(nodes, node_at_);
    nodes_indexed_ = nodes.size();
    index_named(racks, rack_at_);
    racks_indexed_ = racks.size();
    index_named(switches, switch_at_);
    switches_indexed_ = switches.size();
    for (auto& sw : switches) index_named(sw.ports, sw.port_index);
    picks_by_fleet_.clear();
    picks_by_rack_.clear();
    picks_indexed_ = grouped_picks;
    for (size_t k = 0; k < nodes.size(); ++k)
        for (const auto& [key, name] : nodes[k].profiles) {
            if (!grouped_picks.count(key)) continue;
            std::string pick = key + "\n" + name;
            picks_by_rack_[pick + "\n" + nodes[k].rack].push_back(k);
            picks_by_fleet_[std::move(pick)].push_back(k);
        }
}

}  // namespace kiln::config
