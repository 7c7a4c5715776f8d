// Runs commands on a remote machine (a SONiC switch, a GPU host) through the
// system's OpenSSH client, as a CommandRunner: callers build argv exactly as
// for a local command and the runner turns it into one `ssh` invocation.
//
// ssh hands the remote side one command *string* that the login shell parses,
// so argv cannot travel as-is. The runner therefore only accepts tokens from a
// fixed safe set (letters, digits and _ @ % + = : , . / -; not starting with
// '~'), joins them with single spaces and refuses anything else: no quoting to
// get wrong, nothing for the remote shell to expand. Data travels on stdin.
//
// The ssh command line is fixed:
//   ssh -F none -T -o BatchMode=yes -o ConnectTimeout=<s>
//       -o StrictHostKeyChecking=yes -o UserKnownHostsFile=<known_hosts>
//       -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR
//       [-o ControlMaster=auto -o ControlPath=<private dir>/<socket>
//        -o ControlPersist=<s> -o ServerAliveInterval=15 -o ServerAliveCountMax=3]
//       [-o IdentitiesOnly=yes -i <identity>] [-p <port>] [-l <user>] -- <host> <command>
// BatchMode forbids password prompts, so no password is ever involved:
// authentication is by key (identity file or agent). `-F none` keeps the
// operator's ~/.ssh/config out of it, so what kiln runs is what this says.
// The deadline of each CommandSpec bounds the whole ssh run.
//
// Connections are pooled (SshTarget::multiplex, on by default): the first
// command to a target opens an OpenSSH master connection that backgrounds
// itself, and later commands, from this runner or any other runner in the
// process with the same target, ride it as new sessions: no TCP connect, key
// exchange or authentication per command. The control sockets live in a
// directory private to the process (network/ssh_control.h). A master that
// has died leaves a stale socket that ssh itself removes (the command then
// opens a new master); a master idle for control_persist exits by itself;
// after a command times out its master is retired so the next command does
// not ride one that may hang; every master is closed at process exit.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::network {

struct SshTarget {
    std::string host;  // name or address (IPv6 without brackets)
    int port = 22;
    std::string username;       // empty: ssh's default (the local user)
    std::string identity_file;  // empty: ssh's defaults / agent
    std::string known_hosts;    // required: the file pinning the host key
    std::chrono::seconds connect_timeout{10};
    std::string ssh_program = "ssh";           // argv[0]; a path or a name in PATH
    bool multiplex = true;                     // share one master connection per target (see above)
    std::chrono::seconds control_persist{60};  // an idle master exits after this

    // "host", "host:port", "[v6addr]:port" or "[v6addr]" -> host and port.
    static Result<SshTarget> from_address(const std::string& address);
    // "user@host:port" style, for messages (no secrets involved).
    std::string describe() const;
};

// True when `token` may appear in a remote command line unquoted.
bool ssh_safe_token(const std::string& token);

class SshRunner : public CommandRunner {
public:
    // `local` runs the ssh client itself (a ProcessRunner in the product).
    SshRunner(SshTarget target, std::shared_ptr<CommandRunner> local);

    // spec.argv runs remotely; spec.stdin_data, timeout and max_output apply
    // to the ssh process. Errors (nothing started): an unsafe token, env or
    // cwd set (they cannot travel), no known_hosts. Exit status 255 is ssh's
    // own failure (unreachable, auth, host key): see ssh_failed().
    Result<CommandResult> run(const CommandSpec& spec) override;

    // The local argv run() would use for `remote_argv`, for tests and logs
    // (when multiplexing, it makes the process's control directory if none
    // exists yet, as run() would).
    Result<std::vector<std::string>> ssh_argv(const std::vector<std::string>& remote_argv) const;

    const SshTarget& target() const { return target_; }

    // Everything that makes two targets' connections distinct: targets with
    // the same key share a master.
    std::string connection_key() const;

private:
    SshTarget target_;
    std::shared_ptr<CommandRunner> local_;
};

// ssh's own failure (exit 255) as opposed to the remote command's.
inline bool ssh_failed(const CommandResult& r) {
    return !r.timed_out && r.signal == 0 && r.exit_code == 255;
}

// One line for an error message: "timed out after 30s", "exit 1: <first
// stderr line>", "ssh: <first stderr line>".
std::string describe_remote_failure(const CommandResult& r);

}  // namespace kiln::network
