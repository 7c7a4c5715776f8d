// SwitchDriver for SONiC: CONFIG_DB tables rendered by render_roce, read back
// with `sonic-cfggen -d --print-data`, changed with an RFC 6902 JSON Patch
// through `config apply-patch` under a checkpoint, all over SSH.
//
// Constructing one (what the driver factory does for a fleet switch):
//
//   auto driver = SonicDriver::from_switch(sw);        // config::Switch
//   // or, with a runner of your own (tests, a dry run):
//   SonicDriver d("leaf1", std::make_shared<SshRunner>(target, local), options);
//
// from_switch() maps the fleet's switch to SSH:
//   address     "host" or "host:port" ("[v6]:port"), port 22 by default
//   username    the SSH login; default "admin" (SONiC's)
//   ssh_key     the identity file (fleet key `ssh_key`); empty = ssh-agent
//   known_hosts required (fleet key `known_hosts`): host keys are checked strictly
//   password    not used: kiln's SSH is key-only (BatchMode). A switch with a
//               password but no ssh_key is an error ("set ssh_key").
// Errors are Status/Result values in domain "network": wrong os, bad address,
// missing known_hosts, password without ssh_key.
//
// apply() sequence, each step a separate ssh call with its own deadline:
//   [sudo] config checkpoint kiln-<utc>-<n>
//   [sudo] config apply-patch /dev/stdin        (the patch on stdin)
//   on failure: [sudo] config rollback kiln-<utc>-<n>; error says "rolled back"
//   [sudo] config delete-checkpoint kiln-<utc>-<n>
// An empty patch changes nothing and runs nothing.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "network/sonic/render.h"
#include "network/sonic/yang_validator.h"
#include "network/ssh_runner.h"
#include "network/switch_driver.h"
#include "provisioner/core/command.h"

namespace kiln::network::sonic {

struct SonicDriverOptions {
    RenderOptions render;                      // names of the rendered entries
    bool sudo = true;                          // SONiC's admin runs `config` through sudo
    std::chrono::seconds read_timeout{60};     // sonic-cfggen, checkpoint, delete-checkpoint
    std::chrono::seconds apply_timeout{300};   // apply-patch and rollback
    std::chrono::seconds connect_timeout{10};  // ssh ConnectTimeout (from_switch only)
    std::string ssh_program = "ssh";           // from_switch only
    // The models check() validates the merged config with; null: SONiC's
    // models at default_yang_dir(), loaded once per process.
    std::shared_ptr<const YangValidator> validator;
};

class SonicDriver : public SwitchDriver {
public:
    // `name` appears in errors; `switch_runner` runs argv on the switch.
    SonicDriver(std::string name, std::shared_ptr<CommandRunner> switch_runner, SonicDriverOptions options = {});

    // The product's constructor: SSH to the fleet switch through `local`
    // (a ProcessRunner when null).
    static Result<std::unique_ptr<SonicDriver>> from_switch(const config::Switch& sw,
                                                            std::shared_ptr<CommandRunner> local = nullptr,
                                                            SonicDriverOptions options = {});

    std::string os() const override { return "sonic"; }
    Result<nlohmann::json> render(const network::RoceProfile& profile, const std::vector<Port>& ports) const override;
    // The managed tables, plus "_kiln" (switch_facts.h): the whole CONFIG_DB
    // and, in the traditional buffer model, the SKU's pg_profile_lookup.ini.
    Result<nlohmann::json> read_state() override;
    nlohmann::json project_running(const nlohmann::json& state, const std::vector<Port>& ports) const override;
    Result<nlohmann::json> render_for(const network::RoceProfile& profile, const std::vector<Port>& ports,
                                      const nlohmann::json& running) const override;
    // Refuses what SONiC's config updater refuses: a changed PORT lanes
    // (create-only), and any YANG issue the patch adds to the switch's whole
    // CONFIG_DB (issues the switch already had are not kiln's).
    Status check(const nlohmann::json& desired, const nlohmann::json& running) const override;
    std::vector<ConfigChange> diff(const nlohmann::json& desired, const nlohmann::json& running) const override;
    Status apply(const nlohmann::json& desired, const nlohmann::json& running) override;

    // The JSON Patch apply() sends for this pair (empty array = converged).
    nlohmann::json patch_for(const nlohmann::json& desired, const nlohmann::json& running) const;
    // Checkpoint, apply `patch`, roll back on failure, drop the checkpoint.
    Status apply_patch(const nlohmann::json& patch);
    // The whole CONFIG_DB as `sonic-cfggen -d --print-data` prints it.
    Result<nlohmann::json> read_config_db();

private:
    Result<CommandResult> remote(std::vector<std::string> argv, std::chrono::seconds timeout,
                                 std::string stdin_data = {});
    std::vector<std::string> config_cmd(std::initializer_list<std::string> args) const;
    std::string next_checkpoint_name();

    std::string name_;
    std::shared_ptr<CommandRunner> runner_;
    SonicDriverOptions options_;
    int checkpoints_ = 0;
};

}  // namespace kiln::network::sonic
