// `kiln vm xml FLEET NODE [--sysfs DIR] [--nccl-topo] [--accelerator kvm|tcg]`:
// prints the libvirt domain XML (or the NCCL topology file) of each VM the
// node would get, from the same planning the vm stage uses. Changes
// nothing: no connection to libvirt, no probe, no files.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "provisioner/engine/stage_command.h"

namespace kiln::vm {

struct VmXmlArgs {
    std::string fleet;
    std::string node;
    std::string sysfs;        // "" = the shape's sysfs
    std::string accelerator;  // "" = the shape's; "auto" prints kvm when /dev/kvm exists
    bool nccl_topo = false;
};

// Fills in `kiln vm` (created by the CLI shell) with `xml`.
void add_vm_commands(CLI::App& command, VmXmlArgs& args);
using VmFleetLoader = std::function<std::optional<config::Fleet>(const std::string& path)>;
int cmd_vm_xml(const VmXmlArgs& args, const VmFleetLoader& load);

// `kiln vm`, as the vm module registers it.
engine::StageCommandSpec vm_command();

}  // namespace kiln::vm
