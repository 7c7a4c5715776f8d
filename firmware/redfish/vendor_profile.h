// Vendor profiles: what differs between BMCs that speak the same Redfish.
// Detected from the service root (Vendor, Oem) and the manager (Model, Oem);
// each profile is a small table: BIOS intent -> attribute names and values,
// and the quirks of DESIGN §3:
//   Dell iDRAC   clear the job queue before BIOS jobs; 409 right after a
//                power-off is "busy"; RAC0218 (session limit) is busy; an
//                update task stands for a job in the manager's job queue
//                (<manager>/Oem/Dell/Jobs/JID_...), followed after the host
//                reset a Scheduled update waits for
//   HPE iLO      changes are refused during POST (busy); some firmware has no
//                task monitor for updates (poll the inventory instead)
//   Supermicro   BIOS attribute names (kiln always sends
//                BootSourceOverrideEnabled with a boot target, which
//                Supermicro needs and every BMC takes)
//   Lenovo XCC   the BIOS settings object is <Bios>/Pending when the Bios
//                resource does not link one
//   OpenBMC      firmware by multipart push only
//   generic      DSP0266 as written
// Attribute names are never trusted from the table alone: the firmware stage
// checks them against the BMC's Attributes and its attribute registry.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::redfish {

enum class Vendor { Generic, Dell, Hpe, Supermicro, Lenovo, OpenBmc };

struct BiosIntentMapping {
    std::string intent;              // sriov | iommu | acs | above_4g_decoding
    std::vector<std::string> names;  // candidates: the first the BMC has wins
    std::string on = "Enabled";
    std::string off = "Disabled";
    // Why a BMC of this vendor may lack the setting (the intent is then
    // reported as not applicable instead of failing); "" = required.
    std::string absent_reason;
};

struct VendorProfile {
    Vendor vendor = Vendor::Generic;
    std::string name;  // "generic", "dell", "hpe", "supermicro", "lenovo", "openbmc"
    std::vector<BiosIntentMapping> bios;
    std::string settings_fallback_suffix;  // Lenovo: "/Pending"
    bool multipart_only = false;           // never SimpleUpdate, even when advertised
    bool clear_job_queue = false;          // DeleteJobQueue before a BIOS change
    bool retry_conflict = false;           // 409 is "busy", retried
    // An update answered 202 without a task monitor is not an error: the
    // inventory read-back decides.
    bool update_without_task_monitor = false;
    // Where the update's job is followed, under the manager ("" = no job
    // queue): Dell "/Oem/Dell/Jobs".
    std::string job_queue_suffix;
    std::vector<std::string> busy_message_ids;
};

const VendorProfile& profile_for(Vendor vendor);
// Detection from the service root and (may be null) the first manager.
const VendorProfile& detect_vendor(const nlohmann::json& service_root, const nlohmann::json& manager);
// By name ("dell"), for a fleet that names its vendor; nullopt if unknown.
std::optional<Vendor> vendor_from_name(const std::string& name);

// The BIOS attributes for a set of intents on one BMC: each intent mapped
// through the profile to the first candidate name present in `attributes`
// (the Bios resource's Attributes), its value typed like the current one
// (boolean attributes get true/false, enumerations the profile's on/off, or
// the registry's allowed value when `allowed` lists one).
struct BiosIntentResult {
    nlohmann::json attributes = nlohmann::json::object();  // name -> value
    std::vector<std::string> not_applicable;               // "acs: <reason>"
};
// `intents`: intent -> desired on/off. `allowed`: attribute -> allowed
// values from the registry (empty when the BMC has none). Errors
// "firmware.bios_intent" name the intent, the vendor and the candidates.
Result<BiosIntentResult> map_bios_intents(const VendorProfile& profile,
                                          const std::vector<std::pair<std::string, bool>>& intents,
                                          const nlohmann::json& attributes,
                                          const std::map<std::string, std::vector<std::string>>& allowed);

}  // namespace kiln::redfish
