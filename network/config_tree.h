// Diffing the JSON object trees the NVUE and EOS drivers keep their configs
// in. Only the leaves of `desired` are managed: a key the switch has and
// kiln does not render is never a change. A null leaf in `desired` means
// kiln wants the key absent.
#pragma once

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
};

// One ConfigChange per differing leaf, in key order. Arrays are leaves.
std::vector<ConfigChange> diff_trees(const nlohmann::json& desired, const nlohmann::json& running,
                                     const TreeDiffOptions& options);

// An RFC 7386 merge patch that takes `running` to `desired` for the managed
// keys: desired's leaves, plus null for each member of a whole_keys object
// the switch has and kiln does not want. `key` is the name `desired` sits
// under ("" at the root).
nlohmann::json merge_patch(const nlohmann::json& desired, const nlohmann::json& running, const TreeDiffOptions& options,
                           const std::string& key = "");

}  // namespace kiln::network
