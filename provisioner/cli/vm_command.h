// `kiln vm xml FLEET NODE [--sysfs DIR] [--nccl-topo] [--accelerator kvm|tcg]`:
// prints the libvirt domain XML (or the NCCL topology file) of each VM the
// node would get, from the same planning the vm stage uses. Changes
// nothing: no connection to libvirt, no probe, no files.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln::cli {

struct VmXmlArgs {
    std::string fleet;
    std::string node;
    std::string sysfs;        // "" = the shape's sysfs
    std::string accelerator;  // "" = the shape's; "auto" prints kvm when /dev/kvm exists
    bool nccl_topo = false;
    std::string pipelines;  // --pipelines, from the global option
};

CLI::App* add_vm_commands(CLI::App& app, VmXmlArgs& args);
int cmd_vm_xml(const VmXmlArgs& args);

}  // namespace kiln::cli
