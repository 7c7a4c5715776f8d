// A stage module from outside the core, as a third party would add one:
// the stage "greeter", its own top-level fleet table [greeter] read by its
// own reader, and the inputs it states. The test driver registers it; no
// file under provisioner/ names it (issue 18: adding a stage means touching
// the stage's folder only).
//
//   [greeter]
//   message = "hello"          # required: what each node's greeting file holds
//   token = "env:NAME"         # optional secret, scrubbed like any other
//
// The stage reconciles the file "<state_prefix>greeter-<node>.txt" to hold
// the message: observe reads it, plan writes it when it differs, verify
// reads it back. The module's command, `kiln greeter show FLEET [--node N]`,
// prints "NODE: MESSAGE" for each node from the fleet as the CLI shell
// loads it, changing nothing.
#pragma once

#include <optional>
#include <string>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/engine/stage_registry.h"

namespace kiln::test {

struct GreeterConfig {
    std::string message;
    std::optional<Secret> token;
};

config::ConfigTable greeter_table();
const GreeterConfig* greeter_config(const config::Fleet& fleet);
// Declares "greeter", registers its stage, its table and its command.
void register_greeter_module(engine::StageRegistry& registry, const std::string& state_prefix);

}  // namespace kiln::test
