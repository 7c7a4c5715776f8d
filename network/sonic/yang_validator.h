// Validates CONFIG_DB contents against SONiC's YANG models with libyang, as
// SONiC's own `config apply-patch` does before it touches a switch.
//
// CONFIG_DB's shape is not YANG's, so the validator first converts, guided by
// the loaded schema (the rules of SONiC's sonic-yang-mgmt):
// - table T lives in the module whose top container holds container T:
//   {"sonic-port:sonic-port": {"PORT": {"PORT_LIST": [...]}}};
// - a key "Ethernet0|3" is split over the list's key leaves, in key order;
//   the list chosen is the one with that many keys (QUEUE_LIST, not VOQ_*);
// - map tables nest an inner list: DSCP_TO_TC_MAP|ROCE {"26": "3"} becomes
//   {name: ROCE, DSCP_TO_TC_MAP: [{dscp: "26", tc: 3}]};
// - values are typed as RFC 7951 wants: 8..32-bit integers as numbers,
//   booleans as true/false, 64-bit integers, decimals and the rest as strings.
// Every value is checked against its leaf's type while converting (so all bad
// values are reported, not just the first); the tree is then validated whole
// (references, must, mandatory), where libyang stops at the first error.
// Errors name the CONFIG_DB table, key and field, not the YANG path.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/sonic/config_db.h"
#include "provisioner/core/result.h"

namespace kiln::network::sonic {

struct YangIssue {
    std::string table;
    std::string key;    // CONFIG_DB key, "Ethernet0|3"; empty for table-level issues
    std::string field;  // field name; for map tables the map entry ("26"); may be empty
    std::string message;

    // "TABLE|key: field: message"
    std::string str() const;
};

// The directory with SONiC's YANG files: $KILN_SONIC_YANG_DIR when set, else
// the copy the build was configured with.
std::string default_yang_dir();

class YangValidator {
public:
    // Loads every sonic-*.yang of `dir` (sonic-device_metadata first, so
    // when/must conditions that refer to it are checked, not skipped).
    static Result<YangValidator> load(const std::string& dir = default_yang_dir());

    YangValidator(YangValidator&&) noexcept;
    YangValidator& operator=(YangValidator&&) noexcept;
    ~YangValidator();

    // CONFIG_DB JSON -> RFC 7951 instance data; the first conversion issue as the error.
    Result<nlohmann::json> to_yang(const nlohmann::json& config_db) const;

    // Every issue found; empty when the config is valid.
    std::vector<YangIssue> check(const nlohmann::json& config_db) const;

    // check() as a Status: code "network.yang_invalid", the issues joined by "; ".
    Status validate(const nlohmann::json& config_db) const;
    Status validate(const ConfigDb& db) const { return validate(db.json()); }

    // Tables the loaded models define, sorted.
    std::vector<std::string> tables() const;

private:
    struct Impl;
    explicit YangValidator(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::network::sonic
