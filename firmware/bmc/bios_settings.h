// BIOS settings the Redfish way (DSP0266 "Settings resource"): a Bios
// resource is read-only; its "@Redfish.Settings"."SettingsObject" link names
// the settings object clients PATCH. What the settings object holds is the
// pending set; at the next POST it is merged into the Bios "Attributes" and
// emptied, so "Attributes hold the values and the pending set is empty" is
// how a client proves the change took. A mockup's captured settings object is
// pending as captured (DMTF's holds four changes; HPE's a full copy, which
// changes nothing when applied).
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "firmware/bmc/redfish_error.h"
#include "firmware/bmc/resource_store.h"

namespace kiln::bmc {

// settings object URI -> the URI of the resource that links to it (or, for
// a Bios that links none, its <Bios>/Pending: Lenovo XCC).
std::map<std::string, std::string> find_settings_objects(const ResourceStore& store);

// Checks a PATCH's "Attributes" against the Bios "Attributes": every name
// must exist there (vendor names are easy to misspell) and keep its type.
std::optional<RedfishMessage> check_pending_attributes(const nlohmann::json& current, const nlohmann::json& pending);

struct BiosApply {
    std::string bios_uri;
    nlohmann::json bios;
    std::string settings_uri;
    nlohmann::json settings;
};

// The new Bios and settings bodies once `system_uri` goes through POST, or
// nullopt when it has no Bios, no settings object (linked, or
// <Bios>/Pending), or nothing pending.
// `now` stamps "@Redfish.Settings"."Time" (ISO 8601).
std::optional<BiosApply> apply_pending_bios(const ResourceStore& store, const std::string& system_uri,
                                            const std::string& now);

// A link's target: value["@odata.id"] resolved in the store.
std::optional<std::string> resolve_link(const ResourceStore& store, const nlohmann::json& link);

}  // namespace kiln::bmc
