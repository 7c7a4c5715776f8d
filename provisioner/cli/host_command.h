// `kiln host inspect [--sysfs DIR] [--json]`: what discovery sees on a host
// (NUMA nodes, GPUs, NICs and VFs, NVSwitches, IOMMU groups, PCIe switches
// and GPU-NIC pairing). Changes nothing.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln::cli {

struct HostInspectArgs {
    std::string sysfs = "/sys";
    bool json = false;
};

// Adds `host` with its `inspect` subcommand to `app`; returns the inspect
// subcommand so run_cli can tell whether it was chosen.
CLI::App* add_host_commands(CLI::App& app, HostInspectArgs& args);
int cmd_host_inspect(const HostInspectArgs& args);

}  // namespace kiln::cli
