// The `network` stage: the node's switch ports, the uplinks of its leaves
// (both ends: leaf and spine), the core links above them (spine to
// super-spine, both ends), and its host NICs carry the node's RoCE profile,
// so RoCE stays lossless through every tier.
//   observe  for each switch the node's traffic crosses (scopes_for_node):
//            render the profile for the node's ports there, read the running
//            config of those keys, diff;
//            with a managed `host`, read each of the node's NICs through the
//            host NIC applier (network/host/host_scope.h)
//   plan     one action per switch that differs ("configure:<switch>");
//            "host-firmware:<node>" when ConnectX firmware differs (hosts
//            reached over SSH), then "host-nics:<node>" when a NIC setting
//            drifts or failed to read, or after the firmware action (the
//            reboot resets runtime settings); drift found on a converged
//            node is work like any other
//   apply    re-read, re-diff and apply that switch's change all or nothing;
//            for the firmware, mlxconfig set on every NIC that differs, one
//            host reboot, then every NIC read back (nic_firmware.h); for the
//            host NICs, set what differs and read it back
//            (a re-run after a crash finds nothing to do)
//   verify   read back every switch and NIC; any difference left is an error
// resources: "switch:<name>" for each switch the node is cabled to, so the
// scheduler's per_switch limit keeps one node at a time on each leaf (and so
// on each rail). Spines and super-spines, which every node crosses, are not
// held for the node's whole stage (that would run the fabric one node at a
// time): apply takes kiln's own per-switch lock around their change only.
//
// Within one engine plan or run (begin_run .. end_run) the fabric is built
// once and each switch is read once, spines too, shared by every node
// cabled to it: observe compares the whole switch once (every cabled port)
// and gives each node the changes on its own ports, on the uplink ports at
// either end of its leaves' uplinks, on the core links above them, and the
// switch-wide ones; verify takes
// the node's keys from the shared read. apply reads its switch afresh (under
// the engine's "switch:<name>" hold, or kiln's lock above the leaves) and drops the shared read after, so the
// next reader sees what it did. Outside a run (a stage driven by hand) each
// call reads for itself.
//
// Host NICs that the fleet does not manage (no `host`) are said so under
// "host_nics" in the observation, never skipped silently. Unsupported items
// are warnings (Observation::notes), not work, unless the host's `require`
// lists them: then the plan fails. Firmware differences on a `local` or
// `netns` host are warnings too: kiln does not reboot the machine it runs on.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "network/switch_driver.h"
#include "network/switch_scope.h"
#include "provisioner/core/command.h"
#include "provisioner/engine/stage.h"

namespace kiln::network {

class NetworkStage : public engine::Stage {
public:
    using DriverFactory =
        std::function<Result<std::unique_ptr<SwitchDriver>>(const config::Fleet&, const config::Switch&)>;
    // How commands reach a node's host; default host::make_host_runner.
    using HostRunnerFactory = std::function<Result<std::shared_ptr<CommandRunner>>(const config::Node&)>;

    // Default factory: make_switch_driver with the product's transports.
    explicit NetworkStage(DriverFactory factory = {}, HostRunnerFactory hosts = {});

    std::string name() const override { return "network"; }
    std::vector<std::string> resources(const config::Fleet& fleet, const config::Node& node) const override;
    // network_inputs.h; within a run (input_text) each uplink's entry is
    // serialised once and reused by every node of its leaves.
    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override;
    Result<std::string> input_text(const engine::StageContext& ctx) const override;
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;
    void begin_run(const config::Fleet& fleet) override;
    void end_run(const config::Fleet& fleet) override;

    struct RunCache;  // network_stage.cc

    // What this stage has computed once per plan or run to share among
    // nodes, over its lifetime: for tests and benchmarks to count.
    struct Counters {
        // Sets of a switch's shared changes resolved to the node listing
        // them: once per switch read and set of leaves, not once per node.
        size_t shared_resolved = 0;
        // Uplink entries serialised for input hashes: once per uplink per run
        // (network_inputs_text).
        size_t uplinks_serialised = 0;
    };
    Counters counters() const;

private:
    // The fabric a call works on: the run's, or one of its own outside a run.
    struct FabricView {
        std::shared_ptr<RunCache> cache;
        std::optional<Fabric> own;
        const Fabric& fabric() const;
        SwitchProfileFn profiles() const;
    };
    std::shared_ptr<RunCache> run_cache(const config::Fleet& fleet) const;
    Result<FabricView> fabric_view(const config::Fleet& fleet) const;

    Status apply_host(engine::StageContext& ctx);
    Status apply_firmware(engine::StageContext& ctx);
    Status verify_host(engine::StageContext& ctx);

    struct AtomicCounters {
        std::atomic<size_t> shared_resolved{0};
        std::atomic<size_t> uplinks_serialised{0};
    };

    DriverFactory factory_;
    HostRunnerFactory hosts_;
    std::shared_ptr<AtomicCounters> counters_;
    mutable std::mutex runs_mu_;
    std::map<const config::Fleet*, std::pair<int, std::shared_ptr<RunCache>>> runs_;  // holders, cache
};

}  // namespace kiln::network
