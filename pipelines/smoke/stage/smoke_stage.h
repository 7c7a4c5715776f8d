// The "smoke" stage: runs kiln-smoke in every VM of the node at once (one
// rank per VM, a TCP ring between them; with [smoke.NAME] scope = "rack" or
// "fleet" one ring over the VMs of several nodes, each node starting its own
// VMs' ranks once all have met), collects each rank's JSON, holds
// the figures against the fleet's [smoke.NAME.thresholds], and publishes
// the result in the journal (the "smoke.result" record, smoke_record.h).
// A failed check fails the stage with quarantine = true, naming the checks.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/stage/ring_meeting.h"
#include "pipelines/smoke/stage/smoke_inputs.h"
#include "pipelines/smoke/stage/smoke_transport.h"
#include "provisioner/engine/stage.h"

namespace kiln::smoke {

struct SmokeStageOptions {
    std::shared_ptr<SmokeTransport> transport;
    std::vector<std::string> extra_args;  // added to every kiln-smoke (smaller sizes in tests)
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    // Called with the result before a quarantine error returns: handover
    // runs its hook for quarantined nodes here, since the engine ends a
    // node's pipeline at the failing stage.
    std::function<void(engine::StageContext&, const nlohmann::json& result)> on_quarantine;
    // The host PCI functions of a node's VM (its GPUs, then the rest: the
    // NICs given with them), so that a VM fault localisation names is named
    // with the parts to pull. Unset, or an error: the VM's name alone.
    // `guest`: host address -> the address the VM's kernel sees, so that
    // a fabric NIC the RDMA checks name is traced to its host function.
    struct VmDevices {
        std::vector<std::string> gpus;
        std::vector<std::string> others;
        std::map<std::string, std::string> guest;
    };
    std::function<Result<VmDevices>(const config::Fleet&, const config::Node&, const std::string& vm)> vm_host_devices;
};

class SmokeStage : public engine::Stage {
public:
    explicit SmokeStage(SmokeStageOptions options);
    std::string name() const override { return "smoke"; }
    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override {
        return smoke_inputs(ctx.fleet(), ctx.node());
    }
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;
    // Drops the ring meetings and boards of the run's nodes.
    void end_run(const config::Fleet& fleet) override;

    const SmokeStageOptions& options() const { return options_; }

private:
    Result<nlohmann::json> run_node(engine::StageContext& ctx);
    // A failed shared ring: posts `post` (the leader's search, null from the
    // others; none on a resume) and waits parked for the leader's search,
    // then applies it to `result`.
    Result<nlohmann::json> await_localisation(engine::StageContext& ctx, const std::vector<std::string>& met,
                                              nlohmann::json result, std::optional<nlohmann::json> post);
    SmokeStageOptions options_;
    // Shared by every node's thread: where the nodes of a shared ring meet.
    std::shared_ptr<RingMeeting> meeting_ = std::make_shared<RingMeeting>();
};

// [smoke.NAME] relative_floor and relative_verdict (0: no relative verdicts).
struct RelativePolicy {
    double floor = 0;
    bool fail = true;  // false: warn
};

// Holds every rank's checks against the fleet's thresholds and fills
// "verdict" and "failed"; with a relative floor, also holds each of this
// node's floor-type figures against the median over `ring` (every VM entry
// of the ring, {"node", "vm", "report"}, this node's among them; null: this
// node's VMs) and fills "relative" (the distribution and where each VM
// sits) and "warnings". A VM whose rdma_unreachable_peers failed only
// because of peers at fault (a peer's fabric port down, or a peer no other
// member reached) gets a warning naming them instead. A failed RDMA check
// names the host NIC behind each rail it concerns where the rail's
// "host_pci" is known (trace_rails_to_host). Exposed for tests.
void judge_result(nlohmann::json& result, const std::map<std::string, double>& thresholds,
                  const RelativePolicy& relative = {}, const nlohmann::json& ring = nullptr);

// Adds "host_pci" to each rail of a VM's report ("report"."rdma"."rails",
// each with the guest "pci" kiln-smoke read) whose guest address the VM's
// plan passes a host function through at (`host_to_guest`, VmDevices's
// `guest`). Rails on emulated NICs (the lab's) have none.
void trace_rails_to_host(nlohmann::json& vm_entry, const std::map<std::string, std::string>& host_to_guest);

}  // namespace kiln::smoke
