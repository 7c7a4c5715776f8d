#include "network/host/host_runner.h"

#include <fmt/format.h>

#include "network/ssh_runner.h"

namespace kiln::network::host {

NetnsRunner::NetnsRunner(std::string netns, std::shared_ptr<CommandRunner> local)
    : netns_(std::move(netns)), local_(local ? std::move(local) : std::make_shared<ProcessRunner>()) {}

Result<CommandResult> NetnsRunner::run(const CommandSpec& spec) {
    CommandSpec s = spec;
    s.argv = {"ip", "netns", "exec", netns_};
    s.argv.insert(s.argv.end(), spec.argv.begin(), spec.argv.end());
    return local_->run(s);
}

Result<std::shared_ptr<CommandRunner>> make_host_runner(const config::Node& node,
                                                        std::shared_ptr<CommandRunner> local) {
    if (!local) local = std::make_shared<ProcessRunner>();
    const config::HostAccess& h = node.host;
    if (h.mode == "local") return local;
    if (h.mode == "netns") return std::shared_ptr<CommandRunner>(std::make_shared<NetnsRunner>(h.netns, local));
    if (h.mode == "ssh") {
        auto target = SshTarget::from_address(h.address);
        if (!target)
            return make_error("network", target.error().code,
                              fmt::format("node {} host: {}", node.name, target.error().message));
        if (h.known_hosts.empty())
            return make_error(
                "network", "network.ssh_no_known_hosts",
                fmt::format("node {} host: set host.known_hosts: kiln checks SSH host keys strictly", node.name));
        target->username = h.username;
        target->identity_file = h.ssh_key;
        target->known_hosts = h.known_hosts;
        return std::shared_ptr<CommandRunner>(std::make_shared<SshRunner>(std::move(*target), std::move(local)));
    }
    return make_error("network", "network.host_not_managed",
                      fmt::format("node {} has no host table: kiln does not manage its NICs", node.name));
}

Status probe_host(CommandRunner& runner, const config::Node& node) {
    CommandSpec spec;
    spec.argv = {"ip", "-V"};
    spec.timeout = node.host.timeout;
    spec.max_output = 64u << 10;
    const std::string where = fmt::format("node {} host ({})", node.name, node.host.describe());
    auto r = runner.run(spec);
    if (!r) return make_error("network", "network.host_unusable", fmt::format("{}: {}", where, r.error().message));
    if (r->success()) return ok_status();
    const bool over_ssh = node.host.mode == "ssh";
    const bool transient = r->timed_out || (over_ssh && ssh_failed(*r));
    // Exit 255 means ssh itself only over SSH (`ip netns exec` uses it too).
    std::string why = describe_remote_failure(*r);
    if (!over_ssh && why.rfind("ssh: ", 0) == 0) why = fmt::format("exit {}: {}", r->exit_code, why.substr(5));
    return make_error("network", transient ? "network.host_unreachable" : "network.host_unusable",
                      fmt::format("{}: cannot run commands there: {}", where, why), transient);
}

}  // namespace kiln::network::host
