// `kiln host inspect [--sysfs DIR] [--json]`: what discovery sees on a host
// (NUMA nodes, GPUs, NICs and VFs, NVSwitches, IOMMU groups, PCIe switches
// and GPU-NIC pairing). Changes nothing.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "provisioner/engine/stage_command.h"

namespace kiln::vm {

struct HostInspectArgs {
    std::string sysfs = "/sys";
    bool json = false;
};

// Fills in `kiln host` (created by the CLI shell) with `inspect`.
void add_host_commands(CLI::App& command, HostInspectArgs& args);
int cmd_host_inspect(const HostInspectArgs& args);

// `kiln host`, as the vm module registers it.
engine::StageCommandSpec host_command();

}  // namespace kiln::vm
