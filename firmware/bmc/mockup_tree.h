// A Redfish mockup tree on disk, loaded into memory. The layout is DMTF's
// (Redfish-Mockup-Server): <tree>/index.json is /redfish/v1 and
// <tree>/A/B/index.json is /redfish/v1/A/B. An index.xml (the CSDL
// $metadata document) is kept as raw text. Loading is read-only: the tree
// stays as captured; BmcState holds what changes.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "firmware/bmc/json_reader.h"
#include "provisioner/core/result.h"

namespace kiln::bmc {

struct MockupLimits {
    JsonLimits json{16u << 20, 64};  // per file: vendor trees hold multi-MiB registries
    size_t max_files = 100000;
};

struct MockupTree {
    std::string dir;                                  // as given to load()
    std::map<std::string, nlohmann::json> resources;  // "/redfish/v1/Systems/1" -> body
    std::map<std::string, std::string> documents;     // "/redfish/v1/$metadata" -> XML text

    // Errors: "bmc.mockup_missing" (no <dir>/index.json), "bmc.mockup_unreadable",
    // "bmc.mockup_too_many_files", or a JSON error naming the file.
    static Result<MockupTree> load(const std::string& dir, const MockupLimits& limits = {});
};

// The form resources are keyed by: no trailing slash (vendor links such as
// HPE's "/redfish/v1/systems/1/bios/" carry one), no doubled slashes.
std::string normalize_uri(const std::string& path);

// ASCII lower case, for the case-insensitive lookups real BMCs allow (HPE
// links to "/redfish/v1/systems/1" while its tree says "Systems").
std::string lower_ascii(std::string text);

}  // namespace kiln::bmc
