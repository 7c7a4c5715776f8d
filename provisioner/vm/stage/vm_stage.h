// The "vm" stage (DESIGN §2, §3 vm) on one node:
//   observe  each wanted domain (guest_contract.h names): defined or not,
//            its state, the hash stamped in its XML; leftover kiln domains
//            of the node (a shape that now gives fewer VMs); on a live host,
//            ACS Control of the switch ports on the VMs' GPUDirect paths
//            (acs_path.h)
//   plan     "host-acs:<node>" first when a path port redirects P2P (at
//            every boot the firmware sets it again); define + start a missing VM; redefine + start one whose
//            stamped hash differs; start a stopped one; reimage every VM
//            under `kiln reimage`; undefine leftovers; then one
//            "ready:<vm>,<vm>" action for every VM started, and for a
//            running VM that has not printed its marker (a run stopped
//            while it waited). Empty when converged
//   apply    one action; start and reimage do not wait, so a node's VMs
//            boot side by side; "ready" waits for each marker (bounded by
//            the shape's boot_timeout and the stage deadline, cut short by
//            a stop)
//   verify   every wanted VM defined with the wanted hash, running, and
//            (on a local hypervisor) its marker on the serial log; no path
//            port redirecting P2P
// The hypervisor, the command runner and the accelerator probe are
// injected, so unit tests run the stage against fakes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "provisioner/core/command.h"
#include "provisioner/engine/stage.h"
#include "provisioner/vm/accelerator_probe.h"
#include "provisioner/vm/acs_path.h"
#include "provisioner/vm/boot_gate.h"
#include "provisioner/vm/hypervisor.h"
#include "provisioner/vm/node_vms.h"
#include "provisioner/vm/stage/vm_inputs.h"

namespace kiln::vm {

struct VmStageDeps {
    // Opens the node's hypervisor ("" = local).
    std::function<Result<std::unique_ptr<Hypervisor>>(const std::string& uri)> connect;
    std::shared_ptr<CommandRunner> runner;
    // Resolves "auto" on a local hypervisor; `dir` is scratch space.
    std::function<Result<ProbeResult>(Hypervisor& hv, const std::string& dir)> probe;
    // The runner that reaches the PCI config space (setpci) of the machine a
    // shape's sysfs root describes; nullptr for a recorded tree, whose host
    // kiln cannot touch (ACS is then reported by `kiln host inspect` only).
    // Unset: none.
    std::function<std::shared_ptr<CommandRunner>(const std::string& sysfs_root)> host_pci;
};

// The real dependencies: libvirt, ProcessRunner, the probe guest; setpci
// on this machine for the sysfs root "/sys".
VmStageDeps default_vm_stage_deps();

class VmStage : public engine::Stage {
public:
    explicit VmStage(VmStageDeps deps) : deps_(std::move(deps)) {}

    std::string name() const override { return "vm"; }
    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override {
        return vm_inputs(ctx.fleet(), ctx.node());
    }
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    // The accelerator for a node's shape: its setting, or the probe's
    // answer for "auto" (once per hypervisor URI; "auto" on a remote URI
    // is KVM).
    Result<ProbeResult> accelerator(Hypervisor& hv, const NodeVms& vms);

private:
    Result<std::unique_ptr<Hypervisor>> connect(const NodeVms& vms);
    Status prepare_files(engine::StageContext& ctx, const NodeVms& vms, size_t i, bool new_disk);
    Status define(engine::StageContext& ctx, Hypervisor& hv, const NodeVms& vms, size_t i);
    // The node's GPUDirect path ports and the runner to set them; no runner: not managed.
    struct AcsScope {
        std::shared_ptr<CommandRunner> runner;
        std::vector<AcsPort> ports;
    };
    AcsScope acs_scope(const NodeVms& vms) const;
    Status wait_ready(engine::StageContext& ctx, Hypervisor& hv, const NodeVms& vms,
                      const std::vector<std::string>& names);
    // Under TCG, waits until `name` may boot (boot_gate.h); under KVM, at once.
    Status boot_turn(engine::StageContext& ctx, Hypervisor& hv, const NodeVms& vms, const std::string& name);
    // `name` printed its marker (or failed to start): the next VM's turn,
    // and a wake for whoever waits for it.
    void booted(engine::StageContext& ctx, Hypervisor& hv, const std::string& name);

    VmStageDeps deps_;
    NodeVmPlanner planner_;
    std::mutex probe_mu_;
    std::map<std::string, ProbeResult> probed_;  // by URI
    BootGate boot_gate_;                         // one for every node this stage serves
};

}  // namespace kiln::vm
