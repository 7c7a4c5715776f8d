#include "firmware/stage/node_reads.h"

namespace kiln::firmware {

bool covers(const InventoryOptions& have, const InventoryOptions& want) {
    return (have.bios || !want.bios) && (have.network_adapters || !want.network_adapters) &&
           (have.virtual_media || !want.virtual_media) && (have.software_inventory || !want.software_inventory) &&
           have.system_uri == want.system_uri;
}

void NodeReads::keep(const std::string& node, BmcInventory inventory, const InventoryOptions& read_with) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& n = nodes_[node];
    n.inventory = std::move(inventory);
    n.read_with = read_with;
}

std::optional<BmcInventory> NodeReads::take(const std::string& node, const InventoryOptions& want) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end() || !it->second.inventory) return std::nullopt;
    std::optional<BmcInventory> out;
    if (covers(it->second.read_with, want)) out = std::move(it->second.inventory);
    it->second.inventory.reset();
    return out;
}

void NodeReads::drop(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(node);
    if (it != nodes_.end()) it->second.inventory.reset();
}

void NodeReads::keep_registry(const std::string& node, RegistryValues values) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[node].registry = std::move(values);
}

std::optional<RegistryValues> NodeReads::registry(const std::string& node) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return std::nullopt;
    return it->second.registry;
}

redfish::RequestCounter NodeReads::counter(const std::string& node, const std::string& flow) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& c = nodes_[node].counters[flow];
    if (!c) c = std::make_shared<std::atomic<long>>(0);
    return c;
}

std::map<std::string, long> NodeReads::requests(const std::string& node) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, long> out;
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return out;
    for (const auto& [flow, c] : it->second.counters) out[flow] = c->load();
    return out;
}

void NodeReads::clear(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = nodes_.lower_bound(prefix); it != nodes_.end() && it->first.rfind(prefix, 0) == 0;)
        it = nodes_.erase(it);
}

}  // namespace kiln::firmware
