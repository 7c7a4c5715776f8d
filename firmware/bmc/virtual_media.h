// VirtualMedia.InsertMedia / EjectMedia (DSP0266): a crew boots the host OS
// installer by inserting an ISO URL, overriding the boot to Cd and resetting.
// Trees that show VirtualMedia without these actions (DMTF's) get them, so
// every VirtualMedia resource of a tree can be driven.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/bmc/redfish_error.h"
#include "firmware/bmc/resource_store.h"

namespace kiln::bmc {

bool is_virtual_media(const nlohmann::json& body);

// `body` with InsertMedia and EjectMedia actions, targets under `uri`,
// where it lacks them.
nlohmann::json with_media_actions(nlohmann::json body, const std::string& uri);

// Applies InsertMedia parameters to a VirtualMedia body. The password is
// accepted and dropped: it must not land in the state file.
std::optional<RedfishMessage> insert_media(nlohmann::json& body, const nlohmann::json& params);
void eject_media(nlohmann::json& body);

}  // namespace kiln::bmc
