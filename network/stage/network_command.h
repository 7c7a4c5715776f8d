// `kiln network render FLEET [--switch S] [--format sonic|nvue|eos] [--validate]`
//   prints the config kiln would put on switches, as JSON: with --switch,
//   that switch's config (SONiC: its config_db.json tables); without, an
//   object mapping every switch of the format's OS to its config. --validate
//   checks SONiC tables against the YANG models and exits 1 naming each
//   failing table, key and field.
// `kiln network drift FLEET [--switch S] [--json]`
//   reads every cabled port's running config and names each switch, port
//   and field that differs from the profile. Exit 0: none; 2: drift; 1: an
//   error (a switch unreachable, a bad fleet).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/engine/stage_command.h"

namespace kiln::network {

struct NetworkArgs {
    std::string fleet;
    std::string switch_name;
    std::string format;  // "" = the switch's os, or sonic without --switch
    bool validate = false;
    std::string yang_dir;  // "" = the build's default
    bool json = false;
    CLI::App* render = nullptr;
    CLI::App* drift = nullptr;
};

// Fills in `kiln network` (created by the CLI shell) with `render` and `drift`.
void add_network_commands(CLI::App& command, NetworkArgs& args);

// Loads a fleet (printing its errors) the way every other command does.
using FleetLoader = std::function<std::optional<config::Fleet>(const std::string& path)>;
int cmd_network(const NetworkArgs& args, const FleetLoader& load);

// `kiln network`, as the network module registers it.
engine::StageCommandSpec network_command();

}  // namespace kiln::network
