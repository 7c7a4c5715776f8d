// The shipped `kiln`, assembled here rather than in the core: the stages it
// declares, in pipeline order, the ones it implements, and the fleet tables
// they own. A run that selects a declared stage this build does not
// register fails with "stage 'X' is not implemented in this build" before
// any work; a stage neither declared nor registered is unknown.
#include "provisioner/engine/stage_registry.h"

#include <memory>

#include "firmware/stage/firmware_config.h"
#include "firmware/stage/firmware_stage.h"
#include "images/image_config.h"
#include "images/image_stage.h"
#include "network/stage/network_config.h"
#include "network/stage/network_stage.h"
#include "pipelines/smoke/smoke_config.h"
#include "pipelines/smoke/smoke_stage.h"
#include "pipelines/smoke/transport_factory.h"
#include "provisioner/evidence/quarantine_evidence.h"
#include "provisioner/handover/handover_config.h"
#include "provisioner/handover/handover_stage.h"
#include "provisioner/vm/node_vms.h"
#include "provisioner/vm/vm_config.h"
#include "provisioner/vm/vm_stage.h"

namespace kiln::engine {

void register_product_stages(StageRegistry& registry) {
    for (const char* name : {"firmware", "network", "image", "vm", "smoke", "handover"}) registry.declare(name);
    for (auto& table : firmware::firmware_tables()) registry.add_table(std::move(table));
    registry.add_table(network::network_table());
    registry.add_table(images::image_table());
    registry.add_table(vm::vm_table());
    registry.add_table(smoke::smoke_table());
    registry.add_table(handover::handover_table());
    registry.add(std::make_shared<firmware::FirmwareStage>());
    registry.add(std::make_shared<network::NetworkStage>());
    registry.add(std::make_shared<images::ImageStage>());
    registry.add(std::make_shared<vm::VmStage>(vm::default_vm_stage_deps()));
    // handover runs its hook for nodes the smoke stage quarantines too, and
    // each gets its evidence bundle for the vendor.
    auto handover = std::make_shared<handover::HandoverStage>();
    smoke::SmokeStageOptions smoke_options;
    smoke_options.transport = smoke::default_transport();
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
    registry.add(std::make_shared<smoke::SmokeStage>(std::move(smoke_options)));
    registry.add(handover);
}

}  // namespace kiln::engine
