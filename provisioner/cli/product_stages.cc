// The shipped `kiln`, assembled here rather than in the core: the stages it
// declares, in pipeline order, and the modules it links, each registering
// its fleet tables, its stage and its commands. A run that selects a declared stage this build does not
// register fails with "stage 'X' is not implemented in this build" before
// any work; a stage neither declared nor registered is unknown.
#include "provisioner/cli/product_stages.h"

#include <memory>

#include "firmware/stage/firmware_module.h"
#include "images/stage/image_module.h"
#include "network/stage/network_module.h"
#include "pipelines/smoke/stage/smoke_module.h"
#include "provisioner/evidence/evidence_command.h"
#include "provisioner/evidence/quarantine_evidence.h"
#include "provisioner/handover/stage/handover_module.h"
#include "provisioner/vm/node_vms.h"
#include "provisioner/vm/stage/vm_module.h"

namespace kiln::engine {

void register_product_stages(StageRegistry& registry) {
    for (const char* name : {"firmware", "network", "image", "vm", "smoke", "handover"}) registry.declare(name);
    // Each module brings its tables, its stage and its commands.
    firmware::register_firmware_module(registry);
    network::register_network_module(registry);
    images::register_image_module(registry);
    vm::register_vm_module(registry);
    // smoke and handover are wired to each other here, the product's choice:
    // handover runs its hook for nodes the smoke stage quarantines too, and
    // each gets its evidence bundle for the vendor (`kiln evidence` writes
    // one on demand).
    auto handover = handover::register_handover_module(registry);
    registry.add_command(evidence::evidence_command());
    smoke::SmokeStageOptions smoke_options;
    smoke_options.on_quarantine = [handover](StageContext& ctx, const nlohmann::json& result) {
        handover->notify_quarantined(ctx, result);
        evidence::write_quarantine_evidence(ctx, result);
    };
    // A VM fault localisation names is named with its host GPUs and NICs,
    // as the vm stage placed them.
    auto planner = std::make_shared<vm::NodeVmPlanner>();
    smoke_options.vm_host_devices = [planner](const config::Fleet& fleet, const config::Node& node,
                                              const std::string& vm) -> Result<smoke::SmokeStageOptions::VmDevices> {
        auto d = vm::vm_host_devices(*planner, fleet, node, vm);
        if (!d) return d.error();
        return smoke::SmokeStageOptions::VmDevices{d->gpus, d->others, d->guest};
    };
    smoke::register_smoke_module(registry, std::move(smoke_options));
}

}  // namespace kiln::engine
