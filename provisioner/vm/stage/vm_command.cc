#include "provisioner/vm/stage/vm_command.h"

#include <cstdio>
#include <filesystem>

#include "provisioner/vm/node_vms.h"
#include "provisioner/vm/stage/vm_config.h"

namespace kiln::vm {

void add_vm_commands(CLI::App& command, VmXmlArgs& args) {
    command.require_subcommand(1);
    auto* xml = command.add_subcommand("xml", "print the domain XML of each VM the node would get; changes nothing");
    xml->add_option("FLEET", args.fleet, "fleet config (TOML)")->required();
    xml->add_option("NODE", args.node, "node name")->required();
    xml->add_option("--sysfs", args.sysfs, "sysfs root to read instead of the shape's (a recorded tree)");
    xml->add_flag("--nccl-topo", args.nccl_topo, "print each VM's NCCL topology file instead");
    xml->add_option("--accelerator", args.accelerator,
                    "kvm or tcg (default: the shape's; auto shows kvm where /dev/kvm exists)")
        ->check(CLI::IsMember({"kvm", "tcg", "auto"}));
}

int cmd_vm_xml(const VmXmlArgs& args, const VmFleetLoader& load) {
    auto loaded = load(args.fleet);
    if (!loaded) return 1;
    config::Fleet fleet = std::move(*loaded);
    const config::Node* node = fleet.find_node(args.node);
    if (!node) {
        std::fprintf(stderr, "kiln: no node '%s' in %s\n", args.node.c_str(), args.fleet.c_str());
        return 1;
    }
    if (!args.sysfs.empty()) {
        if (VmShape* shape = mutable_vm_shape(fleet, node->profile(kVmTable))) shape->sysfs = args.sysfs;
    }
    NodeVmPlanner planner;
    auto vms = planner.plan(fleet, *node);
    if (!vms) {
        std::fprintf(stderr, "kiln: %s\n", vms.error().str().c_str());
        return 1;
    }
    std::string setting = args.accelerator.empty() ? vms->shape->accelerator : args.accelerator;
    std::string why = "vm." + vms->shape->name + ".accelerator = " + vms->shape->accelerator;
    if (!args.accelerator.empty()) why = "--accelerator " + args.accelerator;
    if (setting == "auto") {
        std::error_code ec;
        setting = std::filesystem::exists("/dev/kvm", ec) ? "kvm" : "tcg";
        why += "; apply probes KVM before using it";
    }
    auto accel = parse_accelerator(setting);
    if (!accel) {
        std::fprintf(stderr, "kiln: %s\n", accel.error().str().c_str());
        return 1;
    }
    std::fprintf(stderr, "kiln: node %s: %zu VM(s), split %s, accelerator %s (%s), network %s\n", node->name.c_str(),
                 vms->vms.size(), split_name(vms->placement.request.split), accelerator_name(*accel), why.c_str(),
                 vms->shape->network.c_str());
    for (const auto& note : vms->placement.notes) std::fprintf(stderr, "kiln: note: %s\n", note.c_str());
    for (size_t i = 0; i < vms->vms.size(); ++i) {
        if (args.nccl_topo) {
            std::printf("<!-- %s: NCCL_TOPO_FILE -->\n%s", vms->vms[i].name.c_str(), vms->vms[i].nccl_topology.c_str());
            continue;
        }
        auto xml = vms->xml(i, *accel);
        if (!xml) {
            std::fprintf(stderr, "kiln: %s\n", xml.error().str().c_str());
            return 1;
        }
        std::printf("<!-- %s -->\n%s", vms->vms[i].name.c_str(), xml->c_str());
    }
    return 0;
}

engine::StageCommandSpec vm_command() {
    return engine::args_command<VmXmlArgs>(
        "vm", "look at a node's VMs", add_vm_commands,
        [](const VmXmlArgs& a, const engine::CommandEnv& env) { return cmd_vm_xml(a, env.load_fleet); });
}

}  // namespace kiln::vm
