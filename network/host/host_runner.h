// The CommandRunner that reaches a node's host the way its fleet `host`
// table says (provisioner/config/fleet_config.h, HostAccess):
//   ssh    an SshRunner (network/ssh_runner.h) over the local ssh client:
//          key-only, host key checked against `known_hosts`
//   local  the local runner itself
//   netns  a NetnsRunner: argv runs as `ip netns exec NAME argv...`, no
//          shell (needs root, as `ip netns exec` does); for rehearsal hosts
//          a network namespace emulates
// The host NIC applier (host_nic.h) then runs the same argv whichever it is.
#pragma once

#include <memory>
#include <string>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::network::host {

class NetnsRunner : public CommandRunner {
public:
    NetnsRunner(std::string netns, std::shared_ptr<CommandRunner> local);
    // env and cwd apply to `ip netns exec` and so to the command it starts.
    Result<CommandResult> run(const CommandSpec& spec) override;

private:
    std::string netns_;
    std::shared_ptr<CommandRunner> local_;
};

// `local` starts processes on this machine (a ProcessRunner when null).
// Errors (domain "network"): "network.host_not_managed" (no `host`), SshTarget's
// "network.bad_address", "network.ssh_no_known_hosts"; each names the node.
Result<std::shared_ptr<CommandRunner>> make_host_runner(const config::Node& node,
                                                        std::shared_ptr<CommandRunner> local = nullptr);

// One cheap command (`ip -V`) so that an unreachable host, a refused key or
// a missing namespace is one error naming the node and how it was reached,
// rather than every NIC setting failing on its own. SSH failures and
// timeouts are transient ("network.host_unreachable"); the rest is "network.host_unusable".
Status probe_host(CommandRunner& runner, const config::Node& node);

}  // namespace kiln::network::host
