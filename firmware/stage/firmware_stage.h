// The firmware stage (DESIGN §3 "firmware"): brings a node's BMC-managed
// firmware and BIOS settings to the fleet's profiles over Redfish.
//   observe  the BMC's inventory (bmc_inventory.h), BIOS attributes and
//            pending settings, power and boot state, the attribute registry
//   plan     one action per component whose version differs
//            ("flash:<component>:<version>"), one for the BIOS
//            attributes that differ ("bios:<digest of the desired set>"),
//            and last one to boot the node's host OS image when the virtual
//            CD does not hold it or holds it unbooted
//            ("boot:<host_os>:<sha256 prefix>", host_os_boot.h)
//   apply    flash: observe again (already there -> nothing; a running
//            update task -> wait for it), sha256-check the artifact, serve it
//            from kiln's artifact server for SimpleUpdate (or push it by
//            multipart), follow the task through the BMC's own restart,
//            reset the host when the update waits for one, read the version
//            back (with the profile's apply_time OnReset the update is
//            staged and the stage resets the host to activate it). bios:
//            PATCH the settings object (If-Match, apply time OnReset), reset
//            the host, wait until Attributes hold the values and nothing is
//            pending. boot: host_os_boot.h.
//   verify   versions and attributes read back equal the desired ones;
//            the virtual CD holds the host OS image and its boot was used.
// Requests (node_reads.h): each step hands its last inventory read to the
// next one instead of reading the same resources again, the BIOS registry
// is read once per run, collections come with their members inline where
// the BMC offers $expand, and verify notes the requests each flow sent
// ("BMC requests: inventory 14, update 9, bios 6").
// Resources: "bmc:<host:port>", so the scheduler's per_bmc limit applies.
// Threads: the engine's worker pool runs node-stages. The update task's
// polls, a task found running at the start, and the read-back's reads after
// an update park between them (StageContext::park): a node waiting for its
// BMC holds no thread. Other waits (reset tasks, Dell job polls, BIOS and
// boot) still go through StageContext::wait_for, so a stop or the stage
// deadline cuts them short.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "firmware/redfish/session_pool.h"
#include "firmware/redfish/task_monitor.h"
#include "firmware/stage/artifact_server.h"
#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_config.h"
#include "firmware/stage/node_reads.h"
#include "provisioner/engine/stage.h"
#include "provisioner/net/http_client.h"

namespace kiln::firmware {

struct FirmwareStageOptions {
    // Used when the fleet has no [artifact_server] table.
    ArtifactServerConfig artifacts;
    redfish::SessionOptions session;
    std::chrono::milliseconds task_poll{2000};  // when the BMC sends no Retry-After
    std::chrono::milliseconds task_timeout{std::chrono::minutes(40)};
    std::chrono::milliseconds settle_poll{5000};  // reading back after a reset or an update
    std::chrono::milliseconds settle_timeout{std::chrono::minutes(20)};
    std::chrono::milliseconds push_timeout{std::chrono::minutes(30)};  // a multipart upload
};

// The node's BMC endpoint with its password resolved (errors name the
// node and the secret reference, never the value).
Result<redfish::Endpoint> bmc_endpoint(const config::Node& node);

class FirmwareStage : public engine::Stage {
public:
    explicit FirmwareStage(std::shared_ptr<net::HttpClient> http = nullptr, FirmwareStageOptions options = {});
    ~FirmwareStage() override;

    std::string name() const override { return "firmware"; }
    std::vector<std::string> resources(const config::Fleet& fleet, const config::Node& node) const override;
    // firmware_inputs.h
    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override;
    void begin_run(const config::Fleet& fleet) override { reads_.clear(fleet.path + "\n"); }
    void end_run(const config::Fleet& fleet) override { reads_.clear(fleet.path + "\n"); }
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    redfish::SessionPool& sessions() { return *pool_; }
    // The requests each flow sent to `node`'s BMC in this run so far
    // (inventory, update, bios, boot).
    std::map<std::string, long> requests(const config::Fleet& fleet, const std::string& node) const {
        return reads_.requests(fleet.path + "\n" + node);
    }
    // Null until the first SimpleUpdate publishes an artifact.
    ArtifactServer* artifact_server();

private:
    // The four steps; the public ones run these inside a guard that turns
    // any exception into that node's error (firmware.unreadable_reply).
    Result<engine::Observation> observe_unguarded(engine::StageContext& ctx);
    Result<std::vector<engine::Action>> plan_unguarded(engine::StageContext& ctx, const engine::Observation& observed);
    Status apply_unguarded(engine::StageContext& ctx, const engine::Action& action);
    Status verify_unguarded(engine::StageContext& ctx);
    // A client counting into `flow`'s tally for the node.
    Result<redfish::Client> client(engine::StageContext& ctx, const std::string& flow);
    // The parts observe and verify read for this node.
    InventoryOptions full_options(const engine::StageContext& ctx) const;
    // The inventory the previous step handed on when it has `want`'s parts,
    // else a fresh read.
    Result<BmcInventory> inventory(engine::StageContext& ctx, redfish::Client& client, const InventoryOptions& want);
    RegistryValues registry(engine::StageContext& ctx, redfish::Client& client, const BmcInventory& inv);
    Result<ArtifactServer*> artifacts(const config::Fleet& fleet);
    Status flash(engine::StageContext& ctx, redfish::Client& client, const engine::Action& action);
    Status apply_bios(engine::StageContext& ctx, redfish::Client& client, const engine::Action& action);
    // After the reset: reads the Bios until `diff` is applied and nothing
    // of it pending, parking between reads where the engine can resume.
    Status await_bios_post(engine::StageContext& ctx, redfish::Client& client, const nlohmann::json& diff,
                           std::chrono::steady_clock::time_point until);
    // Restarts the host. A reset the BMC answers with a task (202) is
    // polled to its end, parking between polls where the engine can
    // resume: `after` is the caller's resume state for what follows the
    // reset (its phase and figures), and that resume calls resume_reset
    // first. The reset's own progress rides in it under "reset".
    Status reset_host(engine::StageContext& ctx, redfish::Client& client, const BmcInventory& inv,
                      nlohmann::json after);
    // Back from a park inside reset_host: polls its task on, sends the
    // steps left (ForceOff then On), and removes "reset" from `state`.
    // Ok at once when `state` holds no reset.
    Status resume_reset(engine::StageContext& ctx, redfish::Client& client, nlohmann::json& state);
    Status send_reset_steps(engine::StageContext& ctx, redfish::Client& client, nlohmann::json& state);
    // True when it waited for a task (the inventory may have changed).
    Result<bool> wait_running_tasks(engine::StageContext& ctx, redfish::Client& client, const BmcInventory& inv);
    Result<redfish::Response> start_update(engine::StageContext& ctx, redfish::Client& client, const BmcInventory& inv,
                                           const redfish::VendorProfile& prof, const FirmwareComponent& comp,
                                           const FirmwareProfile& fw, const nlohmann::json& targets);
    // A BMC task's polling: task_poll when the BMC gives no Retry-After,
    // at most 30 s apart, for task_timeout.
    redfish::TaskOptions task_options() const;
    // Flash, after the update was sent: its task polled (parking between
    // polls), then the version read back (parking between reads).
    redfish::TaskOptions update_task_options(engine::StageContext& ctx, const FirmwareComponent& comp) const;
    Status await_update(engine::StageContext& ctx, redfish::Client& client, const FirmwareComponent& comp,
                        nlohmann::json state);
    // `state[slot]` carries the poll across parks.
    Status poll_or_park(engine::StageContext& ctx, redfish::Client& client, redfish::TaskPoll& poll,
                        nlohmann::json& state, const std::string& what,
                        const nlohmann::json::json_pointer& slot = nlohmann::json::json_pointer("/poll"));
    Status read_back(engine::StageContext& ctx, redfish::Client& client, const FirmwareComponent& comp,
                     const nlohmann::json& state);
    Result<std::string> job_after_task(engine::StageContext& ctx, redfish::Client& client,
                                       const std::string& manager_uri, const redfish::VendorProfile& prof,
                                       const redfish::TaskResult& task, const redfish::TaskOptions& opts);
    bool update_staged(redfish::Client& client, const BmcInventory& inv, const std::string& target,
                       const std::string& marker);
    // Host OS boot (firmware_stage_boot.cc).
    Status boot_host_os(engine::StageContext& ctx, redfish::Client& client, const engine::Action& action);
    // A virtual media or boot override write's reply: 2xx, and on 202 its
    // task polled parking (resume phase "host_media" with `step`, which
    // boot_host_os goes on from).
    Status media_write(engine::StageContext& ctx, redfish::Client& client, const Result<redfish::Response>& r,
                       const std::string& step);
    // Until the host is On with its one-time override used up, parking
    // between reads where the engine can resume.
    Status wait_booted(engine::StageContext& ctx, redfish::Client& client, const std::string& system_uri,
                       std::string power, const std::string& what, std::chrono::steady_clock::time_point until);
    Status verify_host_os(engine::StageContext& ctx, const BmcInventory& inv);

    std::shared_ptr<net::HttpClient> http_;
    FirmwareStageOptions options_;
    std::unique_ptr<redfish::SessionPool> pool_;
    std::mutex artifacts_mu_;
    std::unique_ptr<ArtifactServer> artifacts_;
    NodeReads reads_;
};

// The BIOS attributes a node's profile asks for on this BMC (intents mapped
// through the vendor profile, plus the profile's raw attributes), checked
// against the BMC's Attributes and registry. Exposed for tests.
struct DesiredBios {
    nlohmann::json attributes = nlohmann::json::object();
    std::vector<std::string> not_applicable;
};
Result<DesiredBios> desired_bios(const BiosProfile& profile, const std::string& vendor,
                                 const nlohmann::json& current_attributes,
                                 const std::map<std::string, std::vector<std::string>>& allowed);

}  // namespace kiln::firmware
