// Which inventory members a profile component applies to, and how far they
// are from its version. A component is a set: an 8-GPU node lists eight
// members with one name (or one pattern), and every one of them must be at
// the version, not just the first.
//   - members whose Id or Name is the component's name (case-insensitive);
//   - plus, with `match`, members whose Id or Name fits that glob (* and ?);
//   - none of those: the aliases of find_component (BIOS: the system's
//     BiosVersion, BMC: the manager's FirmwareVersion, NIC: the first adapter);
//   - with `related_item`, only members whose RelatedItem links start with it
//     (the system's own BIOS on a BMC that fronts several systems).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "firmware/stage/bmc_inventory.h"

namespace kiln::firmware {

struct ComponentSelector {
    std::string name;
    std::string match;         // glob, "" for none
    std::string related_item;  // Redfish path prefix, "" for any
};

// Case-insensitive glob: '*' any run, '?' one character.
bool glob_match(std::string_view pattern, std::string_view text);

struct ComponentState {
    std::vector<FirmwareItem> members;  // every member the component applies to, inventory order
    std::vector<FirmwareItem> off;      // those not at the version
    // "3 of 8 at 92.00.20.00.01, 5 at 92.00.19.00.11" (raw strings, most common first).
    std::string counts;
};

std::vector<FirmwareItem> matched_members(const BmcInventory& inv, const ComponentSelector& selector);
ComponentState component_state(const BmcInventory& inv, const ComponentSelector& selector, const std::string& version);

}  // namespace kiln::firmware
