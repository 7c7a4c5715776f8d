// `kiln firmware inventory FLEET [--node N]... [--json]`
//   reads each node's BMC over Redfish and prints its firmware components
//   and versions. JSON: {"nodes": [{"name", "vendor", "components":
//   [{"id", "name", "version"}], "bios_version"}]} (a node whose BMC could
//   not be read has "error" instead, and the exit code is 1).
// `kiln firmware inventory --bmc URL --user U --password-env VAR
//   [--ca FILE | --fingerprint SHA256 | --insecure] [--json]`
//   the same for one BMC without a fleet file (a crew at one server).
// Changes nothing on any BMC.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/engine/stage_command.h"

namespace kiln::firmware {

struct FirmwareArgs {
    std::string fleet;
    std::vector<std::string> nodes;
    std::string bmc_url;
    std::string user;
    std::string password_env;
    std::string ca;
    std::string fingerprint;
    bool insecure = false;
    bool json = false;
};

// Fills in `kiln firmware` (created by the CLI shell) with `inventory`.
void add_firmware_commands(CLI::App& command, FirmwareArgs& args);

using FirmwareFleetLoader = std::function<std::optional<config::Fleet>(const std::string& path)>;
int cmd_firmware(const FirmwareArgs& args, const FirmwareFleetLoader& load);

// `kiln firmware`, as the firmware module registers it.
engine::StageCommandSpec firmware_command();

}  // namespace kiln::firmware
