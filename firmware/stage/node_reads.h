// What one node's firmware flow already read from its BMC, so a run does
// not read the same resources again one step later (item 7 of issue 14,
// "request economy"):
//   - the last inventory, with the parts it was read with, handed to the
//     next step (observe -> first apply -> ... -> verify) and taken once:
//     a step that changes the BMC reads again after its change, and keeps
//     that read for the step after it;
//   - the BIOS attribute registry's values (fixed for a run);
//   - the HTTP requests of each flow (inventory: observe and verify;
//     update: flash actions; bios; boot), counted by the Redfish client.
// The stage keeps one NodeReads; nodes are keyed "<fleet path>\n<node>",
// and a run's are dropped at its start and end (runs of different fleets
// may overlap in one process).
// Thread-safe: nodes run on the engine's worker threads.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "firmware/redfish/redfish_client.h"
#include "firmware/stage/bmc_inventory.h"

namespace kiln::firmware {

using RegistryValues = std::map<std::string, std::vector<std::string>>;

// `have` read at least the parts `want` asks for, of the same system.
bool covers(const InventoryOptions& have, const InventoryOptions& want);

class NodeReads {
public:
    void keep(const std::string& node, BmcInventory inventory, const InventoryOptions& read_with);
    // The kept inventory if it covers `want` (it is removed either way).
    std::optional<BmcInventory> take(const std::string& node, const InventoryOptions& want);
    // Forgets the kept inventory (a step changed the BMC without reading it back).
    void drop(const std::string& node);

    void keep_registry(const std::string& node, RegistryValues values);
    std::optional<RegistryValues> registry(const std::string& node) const;

    // The counter a client for `flow` on `node` counts into.
    redfish::RequestCounter counter(const std::string& node, const std::string& flow);
    // flow -> requests so far.
    std::map<std::string, long> requests(const std::string& node) const;

    // Drops every node whose key starts with `prefix`.
    void clear(const std::string& prefix);

private:
    struct Node {
        std::optional<BmcInventory> inventory;
        InventoryOptions read_with;
        std::optional<RegistryValues> registry;
        std::map<std::string, redfish::RequestCounter> counters;
    };
    mutable std::mutex mu_;
    std::map<std::string, Node> nodes_;
};

}  // namespace kiln::firmware
