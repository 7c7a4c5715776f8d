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

std::string HostAccess::describe() const {
    if (mode == "local") return "local";
    if (mode == "netns") return "netns " + netns;
    if (mode == "ssh") return "ssh " + (username.empty() ? "" : username + "@") + address;
    return "not managed";
}

std::vector<const Node*> Fleet::smoke_ring(const Node& node) const {
    auto it = smoke.find(node.smoke);
    const std::string scope = it == smoke.end() ? "node" : it->second.scope;
    if (scope == "node") return {&node};
    // Nodes whose pipeline has no smoke stage never join a ring.
    auto runs_smoke = [&](const Node& n) {
        auto p = pipelines.find(n.role);
        return p == pipelines.end() ||
               std::find(p->second.stages.begin(), p->second.stages.end(), "smoke") != p->second.stages.end();
    };
    std::vector<const Node*> ring;
    const bool in_fleet = !nodes.empty() && &node >= nodes.data() && &node < nodes.data() + nodes.size();
    if (nodes_indexed_ == nodes.size() && in_fleet) {
        const auto& index = scope == "fleet" ? smoke_by_fleet_ : smoke_by_rack_;
        const auto it = index.find(scope == "fleet" ? node.smoke : node.smoke + "\n" + node.rack);
        const size_t self = static_cast<size_t>(&node - nodes.data());
        bool placed = false;
        if (it != index.end())
            for (size_t k : it->second) {
                if (k >= nodes.size() || nodes[k].smoke != node.smoke) continue;
                if (k == self) {
                    ring.push_back(&node);  // a node that runs no smoke still rings with itself
                    placed = true;
                    continue;
                }
                if (!placed && k > self) {
                    ring.push_back(&node);
                    placed = true;
                }
                if ((scope == "fleet" || nodes[k].rack == node.rack) && runs_smoke(nodes[k])) ring.push_back(&nodes[k]);
            }
        if (!placed) ring.push_back(&node);
        return ring;
    }
    for (const auto& n : nodes)
        if (n.smoke == node.smoke && (scope == "fleet" || n.rack == node.rack) && (&n == &node || runs_smoke(n)))
            ring.push_back(&n);
    return ring;
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
    smoke_by_fleet_.clear();
    smoke_by_rack_.clear();
    for (size_t k = 0; k < nodes.size(); ++k) {
        const Node& n = nodes[k];
        smoke_by_fleet_[n.smoke].push_back(k);
        smoke_by_rack_[n.smoke + "\n" + n.rack].push_back(k);
    }
}

namespace {

using nlohmann::json;

json opt_bool(const std::optional<bool>& b) {
    return b ? json(*b) : json(nullptr);
}
json secret_ref(const std::optional<Secret>& s) {
    return s ? json(s->reference()) : json(nullptr);
}

// The pieces of node_section_json's "network" section, shared by the JSON
// and by network_section_text (which serialises each shared one once).
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
    if (auto it = fleet.network.find(name); it != fleet.network.end()) {
        const auto& p = it->second;
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

json network_section_json(const Fleet& fleet, const Node& node) {
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
                {"profile", network_profile_json(fleet, node.network)},
                {"cables", std::move(cables)}};
    // Only a managed host adds inputs: nodes without one hash as before.
    if (node.host.managed()) out["host"] = network_host_json(node);
    json uplinks = json::array();
    for (const Uplink* u : network_uplinks_of_node(fleet, node)) uplinks.push_back(network_uplink_json(fleet, *u));
    // Only with uplinks: fleets without them keep their input hashes.
    if (!uplinks.empty()) out["uplinks"] = std::move(uplinks);
    return out;
}

}  // namespace

std::string network_section_text(const Fleet& fleet, const Node& node, NetworkTextMemo& memo) {
    // network_section_json's keys in the order dump() writes them (sorted):
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
    out += once(memo.profiles, node.network, [&] { return network_profile_json(fleet, node.network); });
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

json node_section_json(const Fleet& fleet, const Node& node, const std::string& stage) {
    if (stage == "firmware") {
        json comps = json::array();
        if (auto it = fleet.firmware.find(node.firmware); it != fleet.firmware.end())
            for (const auto& c : it->second.components) {
                json comp = {{"name", c.name}, {"version", c.version}, {"sha256", c.sha256}, {"artifact", c.artifact}};
                // Only when set, so fleets without them keep their input hashes.
                if (!c.match.empty()) comp["match"] = c.match;
                if (!c.related_item.empty()) comp["related_item"] = c.related_item;
                comps.push_back(std::move(comp));
            }
        json bios = nullptr;
        if (auto it = fleet.bios.find(node.bios); it != fleet.bios.end()) {
            const auto& b = it->second;
            bios = {{"sriov", opt_bool(b.sriov)},
                    {"iommu", opt_bool(b.iommu)},
                    {"acs", opt_bool(b.acs)},
                    {"above_4g_decoding", opt_bool(b.above_4g_decoding)},
                    {"attributes", b.extra}};
        }
        json out = {{"bmc",
                     {{"url", node.bmc.url},
                      {"username", node.bmc.username},
                      {"password", secret_ref(node.bmc.password)},
                      {"ca_bundle", node.bmc.ca_bundle},
                      {"fingerprint", node.bmc.fingerprint},
                      {"verify_tls", node.bmc.verify_tls}}},
                    {"firmware", comps},
                    {"bios", bios}};
        // Only when set, so fleets without them keep their input hashes.
        if (auto it = fleet.firmware.find(node.firmware);
            it != fleet.firmware.end() && it->second.apply_time != "Immediate")
            out["apply_time"] = it->second.apply_time;
        if (!node.bmc.system.empty()) out["bmc"]["system"] = node.bmc.system;  // only when set: hashes stay
        if (auto it = fleet.host_os.find(node.host_os); it != fleet.host_os.end())
            out["host_os"] = {{"name", it->second.name}, {"image", it->second.image}, {"sha256", it->second.sha256}};
        return out;
    }
    if (stage == "network") return network_section_json(fleet, node);
    if (stage == "image") {
        auto it = fleet.images.find(node.image);
        return {{"image", node.image}, {"recipe", it == fleet.images.end() ? "" : it->second.recipe}};
    }
    if (stage == "vm") {
        json shape = nullptr;
        if (auto it = fleet.vm.find(node.vm); it != fleet.vm.end()) {
            shape = {{"split", it->second.split},
                     {"vcpus", it->second.vcpus},
                     {"memory_gib", it->second.memory_gib},
                     {"hugepages", it->second.hugepages},
                     {"hugepage_size", it->second.hugepage_size},
                     {"accelerator", it->second.accelerator},
                     {"network", it->second.network},
                     {"sysfs", it->second.sysfs},
                     {"images_dir", it->second.images_dir},
                     {"base_image", it->second.base_image},
                     {"ssh_authorized_keys", it->second.ssh_authorized_keys}};
            // Only for count splits, so that other shapes keep the digest they had.
            if (it->second.split == "count") shape["count"] = it->second.count;
            // Likewise only when set: shapes without them keep their digest.
            if (!it->second.fabric_bridge.empty()) shape["fabric_bridge"] = it->second.fabric_bridge;
            if (it->second.rdma_checks) shape["rdma_checks"] = true;
        }
        return {{"shape", shape}, {"image", node.image}, {"libvirt_uri", node.libvirt_uri}};
    }
    if (stage == "smoke") {
        auto it = fleet.smoke.find(node.smoke);
        if (it == fleet.smoke.end())
            return {{"profile", node.smoke}, {"thresholds", json::object()}, {"timeout_ms", 0}};
        json in = {
            {"profile", node.smoke}, {"thresholds", it->second.thresholds}, {"timeout_ms", it->second.timeout.count()}};
        // Only when set, so that profiles without it keep the digest they had.
        if (it->second.relative_floor > 0)
            in["relative"] = {{"floor", it->second.relative_floor}, {"verdict", it->second.relative_verdict}};
        // Likewise the RDMA writes' shape, only the keys set.
        const auto& sp = it->second;
        if (sp.rdma_bytes || sp.rdma_iterations || sp.rdma_pair_timeout) {
            json rdma = json::object();
            if (sp.rdma_bytes) rdma["bytes"] = *sp.rdma_bytes;
            if (sp.rdma_iterations) rdma["iterations"] = *sp.rdma_iterations;
            if (sp.rdma_pair_timeout) rdma["pair_timeout_ms"] = sp.rdma_pair_timeout->count();
            in["rdma"] = rdma;
        }
        // Only for shared rings, so that node rings keep the digest they had.
        if (it->second.scope != "node") {
            json ring = json::array();
            for (const Node* n : fleet.smoke_ring(node)) ring.push_back(n->name);
            in["scope"] = it->second.scope;
            in["ring"] = ring;
        }
        return in;
    }
    if (stage == "handover") {
        if (!fleet.handover) return {{"command", json::array()}, {"webhook", ""}, {"secret", nullptr}};
        return {{"command", fleet.handover->command},
                {"webhook", fleet.handover->webhook},
                {"secret", secret_ref(fleet.handover->webhook_secret)}};
    }
    return {{"node", node.name}, {"rack", node.rack}, {"role", node.role}, {"labels", node.labels}};
}

}  // namespace kiln::config
