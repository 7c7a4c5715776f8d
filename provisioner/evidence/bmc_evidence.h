// What a node's BMC can tell a vendor about a bad part, read over Redfish
// through kiln's client (its session, retries and timeouts): the log
// services' entries (SEL, IML, event log) under the node's system and every
// manager, recent tasks with their messages, part serials (chassis,
// PCIeDevices, Assembly) and the firmware inventory the firmware stage
// reads. Only the service root is required: each other part that cannot be
// read becomes an "unavailable" line with the reason, and the rest stands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/redfish_client.h"

namespace kiln::evidence {

struct BmcEvidenceOptions {
    std::string system_uri;     // the node's system on a shared BMC ("" = the first)
    size_t max_entries = 2000;  // per log service; more are left out and flagged
    size_t max_pages = 50;      // nextLink pages followed per log service
    size_t max_tasks = 50;      // the newest tasks (the collection's last members)
    size_t max_devices = 256;   // PCIeDevices per chassis
};

struct LogServiceDump {
    std::string name;    // "Systems-437XR1138R2-Log1": the file's name in the bundle
    std::string uri;     // the LogService
    nlohmann::json doc;  // {"service", "entries": [...], "truncated", "problems": [...]}
};

struct BmcEvidence {
    std::vector<LogServiceDump> logs;
    nlohmann::json tasks;     // {"tasks": [...]}; null when unavailable
    nlohmann::json parts;     // {"chassis": [...], "pcie_devices": [...], "assemblies": [...]}; null when unavailable
    nlohmann::json firmware;  // BmcInventory::to_json(); null when unavailable
    // (part, why): "bmc.log_services", "bmc.tasks", "bmc.parts", "bmc.firmware".
    std::vector<std::pair<std::string, std::string>> unavailable;
};

// An error only when the service root cannot be read (the BMC is down or
// refuses kiln): then nothing else could be either.
Result<BmcEvidence> collect_bmc_evidence(redfish::Client& client, const BmcEvidenceOptions& options = {});

}  // namespace kiln::evidence
