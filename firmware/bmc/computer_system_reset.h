// ComputerSystem.Reset: what each ResetType does to PowerState, and whether
// the host goes through POST (which is when pending BIOS settings apply and
// a one-time boot override is used up). Pure, so tests read as a table.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::bmc {

struct ResetOutcome {
    std::string power_state;  // "On", "Off", "Paused"
    bool boots = false;       // the host runs POST
};

// Error "bmc.reset_type_unknown" for a type outside the Redfish ResetType enum.
Result<ResetOutcome> plan_reset(const std::string& power_state, const std::string& reset_type);

// The ResetType values the system allows: the inline
// "ResetType@Redfish.AllowableValues" of its Reset action, else the
// "AllowableValues" of the ResetType parameter in `action_info` (the
// resource @Redfish.ActionInfo links to; null when none), else empty
// (meaning any value of the enum).
std::vector<std::string> allowed_reset_types(const nlohmann::json& system, const nlohmann::json& action_info);

}  // namespace kiln::bmc
