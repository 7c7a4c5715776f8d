#include "provisioner/vm/stage/host_command.h"

#include <cstdio>

#include "provisioner/vm/host_report.h"
#include "provisioner/vm/host_topology.h"

namespace kiln::vm {

void add_host_commands(CLI::App& command, HostInspectArgs& args) {
    command.require_subcommand(1);
    auto* inspect = command.add_subcommand(
        "inspect", "discover the host's NUMA nodes, GPUs, NICs, IOMMU groups and PCIe switches from sysfs");
    inspect->add_option("--sysfs", args.sysfs, "sysfs root to read (a recorded tree for rehearsal)")
        ->capture_default_str();
    inspect->add_flag("--json", args.json, "the model as JSON");
}

int cmd_host_inspect(const HostInspectArgs& args) {
    auto host = discover_host({.sysfs_root = args.sysfs});
    if (!host) {
        std::fprintf(stderr, "kiln: %s\n", host.error().str().c_str());
        return 1;
    }
    if (args.json)
        std::printf("%s\n", to_json(*host).dump(2).c_str());
    else
        std::printf("%s", describe(*host).c_str());
    return 0;
}

engine::StageCommandSpec host_command() {
    return engine::args_command<HostInspectArgs>(
        "host", "look at a hypervisor host", add_host_commands,
        [](const HostInspectArgs& a, const engine::CommandEnv&) { return cmd_host_inspect(a); });
}

}  // namespace kiln::vm
