#include "provisioner/cli/host_command.h"

#include <cstdio>

#include "provisioner/vm/host_report.h"
#include "provisioner/vm/host_topology.h"

namespace kiln::cli {

CLI::App* add_host_commands(CLI::App& app, HostInspectArgs& args) {
    auto* host = app.add_subcommand("host", "look at a hypervisor host");
    host->require_subcommand(1);
    auto* inspect = host->add_subcommand(
        "inspect", "discover the host's NUMA nodes, GPUs, NICs, IOMMU groups and PCIe switches from sysfs");
    inspect->add_option("--sysfs", args.sysfs, "sysfs root to read (a recorded tree for rehearsal)")
        ->capture_default_str();
    inspect->add_flag("--json", args.json, "the model as JSON");
    return inspect;
}

int cmd_host_inspect(const HostInspectArgs& args) {
    auto host = vm::discover_host({.sysfs_root = args.sysfs});
    if (!host) {
        std::fprintf(stderr, "kiln: %s\n", host.error().str().c_str());
        return 1;
    }
    if (args.json)
        std::printf("%s\n", vm::to_json(*host).dump(2).c_str());
    else
        std::printf("%s", vm::describe(*host).c_str());
    return 0;
}

}  // namespace kiln::cli
