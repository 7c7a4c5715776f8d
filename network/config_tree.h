// Diffing the JSON object trees every switch driver keeps its config in
// (NVUE's and EOS's trees, SONiC's CONFIG_DB tables). By default only the
// leaves of `desired` are managed: a key the switch has and kiln does not
// render is never a change. A null leaf in `desired` means kiln wants the
// key absent. Owned levels (SONiC's entries) also count what the switch has
// beyond `desired`.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/switch_driver.h"

namespace kiln::network {

struct TreeDiffOptions {
    // The object whose children are ports ("interface" in NVUE, "interfaces"
    // in the EOS form): a change below it names the port.
    std::string ports_key;
    char separator = '/';
    // Objects compared whole, as sets ("switch-priority": {"3": {}}): an
    // extra member on the switch is a change too.
    std::set<std::string> whole_keys;
    // Objects at this depth (0: the root) and deeper are owned member by
    // member: a member the switch has and `desired` lacks is a change to
    // absent, one per leaf below it (SONiC's tables, entries and fields,
    // once narrowed to kiln's scope). -1: none.
    int owned_from_depth = -1;
    // Names a change from its path: location, port, field, whether it flaps
    // the port. Unset: the path joined by `separator`, the port the key
    // under `ports_key`, the field the last key.
    std::function<void(const std::vector<std::string>& path, ConfigChange& change)> label;
};

// One ConfigChange per differing leaf, in key order (an object's own
// members first, then those only the switch has). Arrays are leaves.
std::vector<ConfigChange> diff_trees(const nlohmann::json& desired, const nlohmann::json& running,
                                     const TreeDiffOptions& options);

// An RFC 7386 merge patch that takes `running` to `desired` for the managed
// keys: desired's leaves, plus null for each member of a whole_keys object
// the switch has and kiln does not want. `key` is the name `desired` sits
// under ("" at the root).
nlohmann::json merge_patch(const nlohmann::json& desired, const nlohmann::json& running, const TreeDiffOptions& options,
                           const std::string& key = "");

}  // namespace kiln::network
