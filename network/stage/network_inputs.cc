#include "network/stage/network_inputs.h"

#include "network/stage/network_config.h"

#include <algorithm>

namespace kiln::network {

using config::Cable;
using config::Fleet;
using config::Node;
using config::Rack;
using config::Switch;
using config::SwitchPort;
using config::Uplink;

namespace {

using nlohmann::json;

// The pieces of network_inputs, shared by the JSON and by network_inputs_text
// (which serialises each shared one once).
json network_switch_json(const Switch& s) {
    return {{"name", s.name}, {"os", s.os}, {"address", s.address}, {"rail", s.rail}};
}

json network_port_json(const SwitchPort& p) {
    return {{"name", p.name}, {"speed_mbps", p.speed_mbps}, {"lanes", p.lanes}, {"alias", p.alias}};
}

// A switch and one of its ports, each null when the fleet lacks it.
json switch_end_json(const Fleet& fleet, const std::string& sw_name, const std::string& port_name) {
    json sw_json = nullptr;
    json port = nullptr;
    if (const Switch* s = fleet.find_switch(sw_name)) {
        sw_json = network_switch_json(*s);
        if (const SwitchPort* p = s->find_port(port_name)) port = network_port_json(*p);
    }
    return json{{"switch", std::move(sw_json)}, {"port", std::move(port)}};
}

json network_rack_switches_json(const Fleet& fleet, const std::string& rack) {
    json sws = json::array();
    if (const Rack* r = fleet.find_rack(rack))
        for (const auto& name : r->switches)
            if (const Switch* s = fleet.find_switch(name))
                sws.push_back({{"name", s->name}, {"os", s->os}, {"address", s->address}});
    return sws;
}

json network_profile_json(const Fleet& fleet, const std::string& name) {
    json profile = nullptr;
    if (const RoceProfile* picked = find_network_profile(fleet, name)) {
        const auto& p = *picked;
        profile = {{"lossless_priority", p.lossless_priority},
                   {"roce_dscp", p.roce_dscp},
                   {"cnp_dscp", p.cnp_dscp},
                   {"cnp_priority", p.cnp_priority},
                   {"ecn_min_kb", p.ecn_min_kb},
                   {"ecn_max_kb", p.ecn_max_kb},
                   {"ecn_probability_pct", p.ecn_probability_pct},
                   {"pfc_watchdog_action", p.pfc_watchdog_action},
                   {"pfc_watchdog_detection_ms", p.pfc_watchdog_detection_ms},
                   {"pfc_watchdog_restoration_ms", p.pfc_watchdog_restoration_ms},
                   {"pfc_watchdog_poll_ms", p.pfc_watchdog_poll_ms},
                   {"host_mtu", p.host_mtu},
                   {"switch_mtu", p.switch_mtu},
                   {"buffer_policy", p.buffer_policy}};
        // Written ECN keys change what NVUE gets (RoCE mode's own values
        // otherwise); only when there are some, so other hashes stay.
        json ecn_given = json::array();
        for (const char* k : {"ecn_min_kb", "ecn_max_kb", "ecn_probability_pct"})
            if (p.is_given(k)) ecn_given.push_back(k);
        if (!ecn_given.empty()) profile["ecn_given"] = std::move(ecn_given);
    }
    return profile;
}

json network_host_json(const Node& node) {
    json nics = json::array();
    for (const auto& n : node.nics) {
        json nic = {{"name", n.name},
                    {"ifname", n.netdev()},
                    {"vfs", n.vfs ? json(*n.vfs) : json(nullptr)},
                    {"firmware", n.firmware}};
        // Only when set: NICs without it hash as before.
        if (n.max_acc_out_read) nic["max_acc_out_read"] = *n.max_acc_out_read;
        nics.push_back(std::move(nic));
    }
    return {{"mode", node.host.mode},
            {"address", node.host.address},
            {"username", node.host.username},
            {"ssh_key", node.host.ssh_key},
            {"known_hosts", node.host.known_hosts},
            {"netns", node.host.netns},
            {"require", node.host.require},
            {"nics", std::move(nics)}};
}

// The uplinks of the node's leaves, both ends: the stage configures them
// too, so a recabled or re-speeded uplink is the node's input. In file
// order, each once, as the fleet lists them.
std::vector<const Uplink*> network_uplinks_of_node(const Fleet& fleet, const Node& node) {
    std::vector<std::string> leaves;
    for (const Cable* c : fleet.cables_of(node.name))
        if (std::find(leaves.begin(), leaves.end(), c->switch_name) == leaves.end()) leaves.push_back(c->switch_name);
    std::vector<const Uplink*> mine;
    for (const auto& leaf : leaves)
        for (const Uplink* u : fleet.uplinks_of(leaf)) mine.push_back(u);
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    return mine;
}

json network_uplink_json(const Fleet& fleet, const Uplink& u) {
    json up = {{"end", switch_end_json(fleet, u.switch_name, u.port)},
               {"peer", switch_end_json(fleet, u.peer_switch, u.peer_port)}};
    if (u.cable_length_m > 0) up["cable_length_m"] = u.cable_length_m;
    return up;
}

}  // namespace

json network_inputs(const Fleet& fleet, const Node& node) {
    // The node's own cables with the far port's settings: a recabled or
    // re-speeded port changes the node's network inputs.
    json cables = json::array();
    for (const Cable* c : fleet.cables_of(node.name)) {
        json port = nullptr;
        json sw_json = nullptr;
        if (const Switch* s = fleet.find_switch(c->switch_name)) {
            sw_json = network_switch_json(*s);
            if (const SwitchPort* p = s->find_port(c->port)) port = network_port_json(*p);
        }
        json cable = {{"nic", c->nic}, {"switch", std::move(sw_json)}, {"port", std::move(port)}};
        // Only a length given changes the hash: fleets without one keep their keys.
        if (c->cable_length_m > 0) cable["cable_length_m"] = c->cable_length_m;
        cables.push_back(std::move(cable));
    }
    json out = {{"rack", node.rack},
                {"switches", network_rack_switches_json(fleet, node.rack)},
                {"profile", network_profile_json(fleet, node.profile(kNetworkTable))},
                {"cables", std::move(cables)}};
    // Only a managed host adds inputs: nodes without one hash as before.
    if (node.host.managed()) out["host"] = network_host_json(node);
    json uplinks = json::array();
    for (const Uplink* u : network_uplinks_of_node(fleet, node)) uplinks.push_back(network_uplink_json(fleet, *u));
    // Only with uplinks: fleets without them keep their input hashes.
    if (!uplinks.empty()) out["uplinks"] = std::move(uplinks);
    return out;
}

std::string network_inputs_text(const Fleet& fleet, const Node& node, NetworkTextMemo& memo) {
    // network_inputs's keys in the order dump() writes them (sorted):
    // cables, host, profile, rack, switches, uplinks; within a cable
    // cable_length_m, nic, port, switch.
    auto once = [](std::unordered_map<std::string, std::string>& texts, const std::string& key, auto make) {
        auto it = texts.find(key);
        if (it == texts.end()) it = texts.emplace(key, make().dump()).first;
        return std::string_view(it->second);
    };
    std::string out = "{\"cables\":[";
    bool first = true;
    for (const Cable* c : fleet.cables_of(node.name)) {
        if (!first) out += ',';
        first = false;
        out += '{';
        if (c->cable_length_m > 0) {
            out += "\"cable_length_m\":";
            out += json(c->cable_length_m).dump();
            out += ',';
        }
        out += "\"nic\":";
        out += json(c->nic).dump();
        const Switch* s = fleet.find_switch(c->switch_name);
        const SwitchPort* p = s ? s->find_port(c->port) : nullptr;
        out += ",\"port\":";
        out += p ? network_port_json(*p).dump() : "null";
        out += ",\"switch\":";
        if (s)
            out += once(memo.switches, s->name, [&] { return network_switch_json(*s); });
        else
            out += "null";
        out += '}';
    }
    out += ']';
    if (node.host.managed()) {
        out += ",\"host\":";
        out += network_host_json(node).dump();
    }
    out += ",\"profile\":";
    const std::string& profile = node.profile(kNetworkTable);
    out += once(memo.profiles, profile, [&] { return network_profile_json(fleet, profile); });
    out += ",\"rack\":";
    out += json(node.rack).dump();
    out += ",\"switches\":";
    out += once(memo.racks, node.rack, [&] { return network_rack_switches_json(fleet, node.rack); });
    const auto ups = network_uplinks_of_node(fleet, node);
    if (!ups.empty()) {
        if (memo.uplinks.size() != fleet.uplinks.size()) memo.uplinks.assign(fleet.uplinks.size(), {});
        out += ",\"uplinks\":[";
        for (size_t k = 0; k < ups.size(); ++k) {
            if (k) out += ',';
            auto& text = memo.uplinks[static_cast<size_t>(ups[k] - fleet.uplinks.data())];
            if (!text) {
                text = network_uplink_json(fleet, *ups[k]).dump();
                ++memo.uplinks_serialised;
            }
            out += *text;
        }
        out += ']';
    }
    out += '}';
    return out;
}

}  // namespace kiln::network
