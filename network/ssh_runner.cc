#include "network/ssh_runner.h"

#include <string_view>

#include <fmt/format.h>

#include "network/ssh_control.h"

namespace kiln::network {

namespace {

Error ssh_error(const std::string& code, std::string message) {
    return make_error("network", code, std::move(message));
}

std::string first_line(const std::string& s) {
    size_t start = s.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) return "";
    size_t end = s.find('\n', start);
    std::string line = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// Commands started together before their target has a master each try to
// become it; all but one say so on stderr and go on unpooled. That line is
// about kiln's pooling, not the command: drop it so stderr reads as without.
void drop_mux_notices(std::string& err) {
    static const std::string head = "ControlSocket ", tail = " already exists, disabling multiplexing";
    size_t at = 0;
    while ((at = err.find(head, at)) != std::string::npos) {
        if (at != 0 && err[at - 1] != '\n') {
            at += head.size();
            continue;
        }
        const size_t eol = err.find('\n', at);
        const size_t end = eol == std::string::npos ? err.size() : eol;
        std::string_view line(err.data() + at, end - at);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.size() >= tail.size() && line.substr(line.size() - tail.size()) == tail)
            err.erase(at, eol == std::string::npos ? std::string::npos : end - at + 1);
        else
            at = end;
    }
}

}  // namespace

Result<SshTarget> SshTarget::from_address(const std::string& address) {
    SshTarget t;
    std::string host = address;
    std::string port;
    if (!address.empty() && address[0] == '[') {
        const size_t close = address.find(']');
        if (close == std::string::npos)
            return ssh_error("network.bad_address", fmt::format("address '{}': missing ']'", address));
        host = address.substr(1, close - 1);
        if (close + 1 < address.size()) {
            if (address[close + 1] != ':')
                return ssh_error("network.bad_address", fmt::format("address '{}': expected ':' after ']'", address));
            port = address.substr(close + 2);
        }
    } else if (const size_t colon = address.find(':'); colon != std::string::npos) {
        if (address.find(':', colon + 1) != std::string::npos)
            return ssh_error("network.bad_address",
                             fmt::format("address '{}': write an IPv6 address as [addr] or [addr]:port", address));
        host = address.substr(0, colon);
        port = address.substr(colon + 1);
    }
    if (host.empty() || !ssh_safe_token(host) || host[0] == '-')
        return ssh_error("network.bad_address", fmt::format("address '{}': not a host name or address", address));
    if (!port.empty() || address.back() == ':') {
        const bool digits =
            !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
        const int p = digits ? std::stoi(port) : 0;
        if (p < 1 || p > 65535) return ssh_error("network.bad_address", fmt::format("address '{}': bad port", address));
        t.port = p;
    }
    t.host = host;
    return t;
}

std::string SshTarget::describe() const {
    std::string s = username.empty() ? "" : username + "@";
    s += host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (port != 22) s += ":" + std::to_string(port);
    return s;
}

bool ssh_safe_token(const std::string& token) {
    if (token.empty() || token[0] == '~') return false;
    for (unsigned char c : token) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '@' || c == '%' || c == '+' || c == '=' || c == ':' || c == ',' || c == '.' || c == '/' ||
                        c == '-';
        if (!ok) return false;
    }
    return true;
}

SshRunner::SshRunner(SshTarget target, std::shared_ptr<CommandRunner> local)
    : target_(std::move(target)), local_(std::move(local)) {}

Result<std::vector<std::string>> SshRunner::ssh_argv(const std::vector<std::string>& remote_argv) const {
    if (target_.known_hosts.empty())
        return ssh_error(
            "network.ssh_no_known_hosts",
            fmt::format("{}: no known_hosts file: kiln checks SSH host keys strictly", target_.describe()));
    if (remote_argv.empty()) return ssh_error("network.ssh_bad_command", "no remote command");
    std::string remote;
    for (const auto& a : remote_argv) {
        if (!ssh_safe_token(a))
            return ssh_error("network.ssh_bad_command",
                             fmt::format("refusing to send '{}' over ssh: only letters, digits and _@%+=:,./- are "
                                         "passed to the remote shell",
                                         a));
        remote += (remote.empty() ? "" : " ") + a;
    }
    std::vector<std::string> argv = {target_.ssh_program,
                                     "-F",
                                     "none",
                                     "-T",
                                     "-o",
                                     "BatchMode=yes",
                                     "-o",
                                     fmt::format("ConnectTimeout={}", target_.connect_timeout.count()),
                                     "-o",
                                     "StrictHostKeyChecking=yes",
                                     "-o",
                                     "UserKnownHostsFile=" + target_.known_hosts,
                                     "-o",
                                     "GlobalKnownHostsFile=/dev/null",
                                     "-o",
                                     "LogLevel=ERROR"};
    if (target_.multiplex) {
        // No private directory (full disk, read-only /tmp): run unpooled rather than fail.
        const std::string socket = ssh_control_socket(connection_key(), target_.ssh_program);
        if (!socket.empty()) {
            // ServerAlive: a master whose switch went silent ends itself
            // instead of holding sessions that never answer.
            argv.insert(argv.end(), {"-o", "ControlMaster=auto", "-o", "ControlPath=" + socket, "-o",
                                     fmt::format("ControlPersist={}", target_.control_persist.count()), "-o",
                                     "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"});
        }
    }
    if (!target_.identity_file.empty()) {
        argv.insert(argv.end(), {"-o", "IdentitiesOnly=yes", "-i", target_.identity_file});
    }
    if (target_.port != 22) argv.insert(argv.end(), {"-p", std::to_string(target_.port)});
    if (!target_.username.empty()) argv.insert(argv.end(), {"-l", target_.username});
    argv.insert(argv.end(), {"--", target_.host, remote});
    return argv;
}

Result<CommandResult> SshRunner::run(const CommandSpec& spec) {
    if (!spec.env.empty() || !spec.unset_env.empty() || !spec.cwd.empty())
        return ssh_error("network.ssh_bad_command", "environment and working directory cannot be passed over ssh");
    auto argv = ssh_argv(spec.argv);
    if (!argv) return argv.error();
    CommandSpec local = spec;
    local.argv = std::move(*argv);
    auto result = local_->run(local);
    // A command that ran out its deadline may have been stuck on the master
    // (a master that hangs): the next one opens a fresh connection.
    if (target_.multiplex && result && result->timed_out) retire_ssh_control_socket(connection_key());
    if (target_.multiplex && result) drop_mux_notices(result->err);
    return result;
}

std::string SshRunner::connection_key() const {
    // Who is reached, as whom, checked against what; fields joined by a
    // byte no path or name here holds.
    return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", target_.ssh_program, target_.host, target_.port,
                       target_.username, target_.identity_file, target_.known_hosts);
}

std::string describe_remote_failure(const CommandResult& r) {
    if (r.timed_out) return fmt::format("timed out after {}ms", r.elapsed.count());
    if (r.signal != 0) return fmt::format("killed by signal {}", r.signal);
    std::string line = first_line(r.err);
    if (line.empty()) line = first_line(r.out);
    if (ssh_failed(r)) return "ssh: " + (line.empty() ? std::string("connection failed") : line);
    return fmt::format("exit {}{}", r.exit_code, line.empty() ? "" : ": " + line);
}

}  // namespace kiln::network
