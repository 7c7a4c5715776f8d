#include "provisioner/cli/vm_command.h"

#include <cstdio>
#include <filesystem>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/stage_registry.h"
#include "provisioner/vm/node_vms.h"
#include "provisioner/vm/vm_config.h"

namespace kiln::cli {

CLI::App* add_vm_commands(CLI::App& app, VmXmlArgs& args) {
    auto* vm = app.add_subcommand("vm", "look at a node's VMs");
    vm->require_subcommand(1);
    auto* xml = vm->add_subcommand("xml", "print the domain XML of each VM the node would get; changes nothing");
    xml->add_option("FLEET", args.fleet, "fleet config (TOML)")->required();
    xml->add_option("NODE", args.node, "node name")->required();
    xml->add_option("--sysfs", args.sysfs, "sysfs root to read instead of the shape's (a recorded tree)");
    xml->add_flag("--nccl-topo", args.nccl_topo, "print each VM's NCCL topology file instead");
    xml->add_option("--accelerator", args.accelerator,
                    "kvm or tcg (default: the shape's; auto shows kvm where /dev/kvm exists)")
        ->check(CLI::IsMember({"kvm", "tcg", "auto"}));
    return xml;
}

int cmd_vm_xml(const VmXmlArgs& args) {
    engine::StageRegistry registry;
    engine::register_product_stages(registry);
    config::LoadOptions lo = registry.load_options();
    lo.default_pipelines_dir = KILN_DEFAULT_PIPELINES_DIR;
    lo.pipelines_dir_override = args.pipelines;
    auto loaded = config::load_fleet(args.fleet, lo);
    if (!loaded.fleet) {
        for (const auto& d : loaded.errors) std::fprintf(stderr, "%s\n", d.str().c_str());
        return 1;
    }
    config::Fleet fleet = std::move(*loaded.fleet);
    const config::Node* node = fleet.find_node(args.node);
    if (!node) {
        std::fprintf(stderr, "kiln: no node '%s' in %s\n", args.node.c_str(), args.fleet.c_str());
        return 1;
    }
    if (!args.sysfs.empty()) {
        if (vm::VmShape* shape = vm::mutable_vm_shape(fleet, node->profile(vm::kVmTable))) shape->sysfs = args.sysfs;
    }
    vm::NodeVmPlanner planner;
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
    auto accel = vm::parse_accelerator(setting);
    if (!accel) {
        std::fprintf(stderr, "kiln: %s\n", accel.error().str().c_str());
        return 1;
    }
    std::fprintf(stderr, "kiln: node %s: %zu VM(s), split %s, accelerator %s (%s), network %s\n", node->name.c_str(),
                 vms->vms.size(), vm::split_name(vms->placement.request.split), vm::accelerator_name(*accel),
                 why.c_str(), vms->shape->network.c_str());
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

}  // namespace kiln::cli
