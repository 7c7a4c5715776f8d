// Which FirmwareInventory member an image is for, and what changes when it
// is applied: the member's Version, and for a BIOS the ComputerSystem's
// BiosVersion, for a BMC the Manager's FirmwareVersion (DSP0266 lists all
// three as places clients read versions from).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/bmc/resource_store.h"
#include "provisioner/core/result.h"

namespace kiln::bmc {

// "bios", "bmc", "nic" or "" for a SoftwareInventory member (see
// docs/kiln-bmc.md for the rules).
std::string component_class(const nlohmann::json& member);

// The canonical URIs of the FirmwareInventory members.
std::vector<std::string> inventory_members(const ResourceStore& store);

// The members an image for `component` goes to. With `targets` (request
// URIs: members, or a ComputerSystem / Manager standing for its BIOS / BMC
// member) every one must exist and match, else error "bmc.target_mismatch" or
// "bmc.target_unknown"; without, every member whose Id or class matches, else
// "bmc.no_targets".
Result<std::vector<std::string>> update_targets(const ResourceStore& store, const std::string& component,
                                                const std::vector<std::string>& targets);

struct VersionChange {
    std::vector<std::pair<std::string, nlohmann::json>> bodies;  // canonical URI -> new body
    bool bmc = false;                                            // a BMC target: the BMC restarts
};

// How a BMC writes `version` where `current` stood (vendor_mode.h: HPE's
// "iLO 5 v2.72"); unset: as given.
using VersionForm = std::function<std::string(const std::string& current, const std::string& version)>;

// The new bodies once `version` is on `member` (a canonical inventory URI).
VersionChange apply_version(const ResourceStore& store, const std::string& member, const std::string& version,
                            const VersionForm& form = {});

}  // namespace kiln::bmc
