// [handover]: the table the handover stage owns, registered with the stage
// (config_table.h) and read here, not in the core loader. It names the
// hook run for each node handed over or quarantined: a command, or an
// HMAC-signed webhook (docs/handover.md).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::handover {

struct HandoverHook {
    std::vector<std::string> command;      // argv, no shell; JSON document on stdin
    std::string webhook;                   // URL
    std::optional<Secret> webhook_secret;  // HMAC key reference
    config::Duration timeout{std::chrono::seconds(30)};
    config::SourcePos pos;
};

inline constexpr const char* kHandoverTable = "handover";

// The table's key and reader, for the stage registry.
config::ConfigTable handover_table();

// The fleet's hook; nullptr when the fleet file has no [handover].
const HandoverHook* handover_hook(const config::Fleet& fleet);
// Sets it, for a fleet built in code (tests, benchmarks).
void set_handover_hook(config::Fleet& fleet, HandoverHook hook);

}  // namespace kiln::handover
