#include "provisioner/core/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

extern char** environ;

namespace kiln {

namespace {

// A child that exits without reading its stdin makes the write raise
// SIGPIPE, whose default action kills kiln (a handover hook that fails
// early must be an error, not a crash). Blocked on this thread for the
// write, and a SIGPIPE the write raised is taken off the pending set.
class SigpipeBlocked {
public:
    SigpipeBlocked() {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigpending(&pending);
        was_pending_ = sigismember(&pending, SIGPIPE) == 1;
        pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    }
    ~SigpipeBlocked() {
        sigset_t pending;
        sigpending(&pending);
        if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
            const timespec none{0, 0};
            while (sigtimedwait(&pipe_, nullptr, &none) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeBlocked(const SigpipeBlocked&) = delete;
    SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

private:
    sigset_t pipe_{}, old_{};
    bool was_pending_ = false;
};

using Clock = std::chrono::steady_clock;

// Closes what it owns.
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

bool make_pipe(Fd& r, Fd& w) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return false;
    r.fd = p[0];
    w.fd = p[1];
    return true;
}

std::string resolve(const std::string& name, const std::map<std::string, std::string>& env) {
    if (name.find('/') != std::string::npos) return name;
    std::string path;
    if (auto it = env.find("PATH"); it != env.end())
        path = it->second;
    else if (const char* p = std::getenv("PATH"))
        path = p;
    else
        path = "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find(':', start);
        if (end == std::string::npos) end = path.size();
        std::string dir = path.substr(start, end - start);
        if (dir.empty()) dir = ".";
        std::string candidate = dir + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        start = end + 1;
    }
    return "";
}

}  // namespace

std::string describe_argv(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) {
        if (!out.empty()) out += ' ';
        const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,+@%", c);
        });
        if (plain) {
            out += a;
        } else {
            out += '\'';
            for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
            out += '\'';
        }
    }
    return out;
}

Result<CommandResult> ProcessRunner::run(const CommandSpec& spec) {
    if (spec.argv.empty()) return make_error("command", "command.empty", "no command given");
    const std::string exe = resolve(spec.argv[0], spec.env);
    if (exe.empty() || ::access(exe.c_str(), X_OK) != 0)
        return make_error("command", "command.not_found",
                          "cannot run " + spec.argv[0] + ": not found or not executable");

    // The child's environment: inherited, minus unset_env, plus env.
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string kv = *e;
        auto eq = kv.find('=');
        if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& k : spec.unset_env) env.erase(k);
    for (const auto& [k, v] : spec.env) env[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = spec.argv;
    std::vector<char*> argv;
    for (auto& s : argv_copy) argv.push_back(s.data());
    argv.push_back(nullptr);

    Fd in_r, in_w, out_r, out_w, err_r, err_w;
    if (!make_pipe(in_r, in_w) || !make_pipe(out_r, out_w) || !make_pipe(err_r, err_w))
        return make_error("command", "command.pipe", std::string("cannot create pipes: ") + std::strerror(errno));

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_r.fd, 0);
    posix_spawn_file_actions_adddup2(&fa, out_w.fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_w.fd, 2);
    // Nothing else of kiln's reaches the child: sockets and files opened
    // without close-on-exec (libraries' too) would leak into every tool and
    // shift its own descriptor numbers (mmdebstrap's apt hooks failed on that).
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, spec.cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // The child starts with default signal handling and nothing blocked,
    // whatever kiln's threads have blocked; in its own process group so a
    // timeout can end what it started too.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

    const auto started = Clock::now();
    pid_t pid = 0;
    int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return make_error("command", "command.spawn", "cannot run " + spec.argv[0] + ": " + std::strerror(rc));
    in_r.reset();
    out_w.reset();
    err_w.reset();
    ::fcntl(in_w.fd, F_SETFL, O_NONBLOCK);
    if (spec.stdin_data.empty()) in_w.reset();

    CommandResult result;
    size_t written = 0;
    const auto deadline = started + spec.timeout;
    Clock::time_point kill_at = Clock::time_point::max();
    bool term_sent = false, kill_sent = false;
    // At the deadline: SIGTERM to the child's process group, SIGKILL after the grace.
    auto escalate = [&](Clock::time_point now) {
        if (!term_sent && now >= deadline) {
            result.timed_out = true;
            ::kill(-pid, SIGTERM);
            term_sent = true;
            kill_at = now + spec.kill_grace;
        } else if (term_sent && !kill_sent && now >= kill_at) {
            ::kill(-pid, SIGKILL);
            kill_sent = true;
        }
    };
    char buf[65536];
    while (out_r.fd >= 0 || err_r.fd >= 0) {
        auto now = Clock::now();
        escalate(now);
        auto next = term_sent ? (kill_sent ? now + std::chrono::seconds(1) : kill_at) : deadline;
        int wait_ms = static_cast<int>(
            std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count(), 0, 1000));
        pollfd fds[3];
        int n = 0;
        fds[n++] = {out_r.fd, POLLIN, 0};
        fds[n++] = {err_r.fd, POLLIN, 0};
        fds[n++] = {in_w.fd, POLLOUT, 0};
        if (::poll(fds, static_cast<nfds_t>(n), wait_ms) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            Fd& fd = i == 0 ? out_r : err_r;
            if (fd.fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = ::read(fd.fd, buf, sizeof buf);
            if (got > 0) {
                std::string& dst = i == 0 ? result.out : result.err;
                size_t room = spec.max_output > dst.size() ? spec.max_output - dst.size() : 0;
                dst.append(buf, std::min(room, static_cast<size_t>(got)));
                if (static_cast<size_t>(got) > room) result.truncated = true;
            } else if (got == 0 || errno != EINTR) {
                fd.reset();
            }
        }
        if (in_w.fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w;
            int werr = 0;
            {
                SigpipeBlocked quiet;
                w = ::write(in_w.fd, spec.stdin_data.data() + written, spec.stdin_data.size() - written);
                werr = errno;
            }
            if (w > 0) written += static_cast<size_t>(w);
            if (w < 0 && werr != EAGAIN && werr != EINTR) in_w.reset();  // the child closed stdin (EPIPE)
            if (written == spec.stdin_data.size()) in_w.reset();
        }
    }
    in_w.reset();
    // Output closed: the child is exiting (or handed its pipes to a
    // grandchild). Keep the deadline while reaping.
    int status = 0;
    for (;;) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        escalate(Clock::now());
        ::poll(nullptr, 0, 10);
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    return result;
}

}  // namespace kiln
