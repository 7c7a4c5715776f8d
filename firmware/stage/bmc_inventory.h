// What one BMC reports, read by walking @odata.id links from the service
// root (never a hard-coded /Systems/1): firmware components with versions
// (UpdateService.FirmwareInventory, ComputerSystem.BiosVersion,
// Manager.FirmwareVersion, chassis NetworkAdapters, SoftwareInventory
// merged in without duplicates), BIOS attributes and
// what is pending in the settings object, power state, boot override, and
// the update and reset entry points. The firmware stage observes with it;
// `kiln firmware inventory` prints it. Only the service root and the
// system are required; every other part is read on its own and, when it
// cannot be, becomes a warning (InventoryWarning).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/redfish_client.h"
#include "firmware/redfish/vendor_profile.h"

namespace kiln::firmware {

struct FirmwareItem {
    std::string id;
    std::string name;
    std::string version;
    std::string uri;                   // the resource (a SimpleUpdate/multipart Target); "" for derived items
    std::string source;                // inventory | software_inventory | system | manager | network_adapter
    std::vector<std::string> related;  // RelatedItem links (the system or manager it belongs to)
};

// A part of the inventory that could not be read (a link that answers 404,
// a collection without Members, a body of the wrong shape). Real BMCs are
// like this all the time: the rest of the inventory stands, and the node
// fails only when its profile needs exactly this part.
struct InventoryWarning {
    // manager | update_service | firmware_inventory | software_inventory |
    // network_adapters | bios
    std::string part;
    std::string message;     // the error, naming the resource
    bool transient = false;  // a 5xx or dropped connection: may read fine later
    std::string str() const { return part + ": " + message; }
};

struct BiosState {
    std::string uri;
    std::string settings_uri;  // "" when the BMC offers no settings object
    std::string registry;      // AttributeRegistry name
    nlohmann::json attributes = nlohmann::json::object();
    // Settings-object attributes whose value differs from the current one:
    // what the next reset will apply.
    nlohmann::json pending = nlohmann::json::object();
    std::vector<std::string> apply_times;  // @Redfish.Settings.SupportedApplyTimes
};

// The BMC's virtual CD/DVD drive: the first VirtualMedia member whose
// MediaTypes list CD or DVD, under the ComputerSystem (newer services) or
// the Manager (iLO, iDRAC, older services).
struct VirtualMediaSlot {
    std::string uri;
    std::string image;  // the inserted image's URI; "" when none
    bool inserted = false;
    std::string insert_target;  // "" when the BMC has no InsertMedia action (PATCH the resource)
    std::string eject_target;   // "" when it has no EjectMedia action
    std::vector<std::string> media_types;
};

struct BmcInventory {
    std::string vendor = "generic";
    std::string system_uri;
    std::string manager_uri;
    std::string bios_version;
    std::string bmc_version;
    std::vector<FirmwareItem> components;
    std::optional<BiosState> bios;
    std::string power_state;
    std::string boot_target;
    std::string boot_enabled;
    std::vector<std::string> boot_targets;  // BootSourceOverrideTarget@Redfish.AllowableValues
    // Read only with InventoryOptions::virtual_media: the collections looked
    // at, and the CD/DVD slot found in them (none: the BMC cannot boot an ISO).
    bool virtual_media_read = false;
    std::vector<std::string> virtual_media_collections;
    std::optional<VirtualMediaSlot> cd;
    std::string reset_target;
    std::vector<std::string> reset_types;
    std::string simple_update_target;
    std::vector<std::string> transfer_protocols;
    // SimpleUpdate's @Redfish.OperationApplyTimeSupport.SupportedValues
    // (empty: the BMC does not say).
    std::vector<std::string> simple_update_apply_times;
    std::string multipart_uri;
    std::vector<std::string> update_apply_times;  // MultipartHttpPushUri apply times offered
    std::string tasks_uri;                        // TaskService Tasks collection
    std::string registries_uri;
    std::vector<InventoryWarning> warnings;  // optional parts not read
    // The $expand value collections were read with ("" when the service
    // offers none): later reads on this BMC (tasks) use it too.
    std::string expand_query;

    // The warnings about `part`, joined ("" when none).
    std::string warnings_about(const std::string& part) const;
    nlohmann::json to_json() const;
};

struct InventoryOptions {
    bool bios = true;  // read Bios and its settings object
    bool network_adapters = true;
    bool virtual_media = false;      // find the CD/DVD VirtualMedia slot (host OS boot)
    bool software_inventory = true;  // UpdateService.SoftwareInventory, merged in
    // The node's system on a BMC with several ("" = the first member). An
    // error (redfish.missing) when the Systems collection does not list it.
    std::string system_uri;
};

Result<BmcInventory> read_inventory(redfish::Client& client, const InventoryOptions& options = {});

// The reported version satisfies the desired one: the same release under
// the vendor's rules (firmware_version.h: "iLO 5 v2.70" is "2.70",
// "A43 v2.52 (10/29/2021)" is "A43 v2.52"), or the desired followed by a
// build tag ("1.46.0" vs "1.46.0-kiln").
bool version_matches(const std::string& reported, const std::string& desired, const std::string& vendor = "generic");

// The component a fleet names ("BIOS", "BMC", an inventory Id or Name, a
// NIC's adapter Id): its current version and update target. BIOS and BMC
// also match the system's BiosVersion and the manager's FirmwareVersion.
std::optional<FirmwareItem> find_component(const BmcInventory& inventory, const std::string& name);

// The BIOS attribute registry's allowed values per attribute, when the BMC
// serves one (Registries -> member with that Id -> Location Uri ->
// RegistryEntries.Attributes). Empty when it has none.
std::map<std::string, std::vector<std::string>> read_bios_registry(redfish::Client& client,
                                                                   const BmcInventory& inventory);

}  // namespace kiln::firmware
