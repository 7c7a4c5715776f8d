#include "pipelines/smoke/child_process.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kiln::smoke {

namespace {

constexpr size_t kMaxOutput = size_t{256} * 1024;

int ms_until(Child::Deadline deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    return left.count() > 1000 ? 1000 : static_cast<int>(left.count());
}

}  // namespace

Child::~Child() {
    if (pid_ > 0) kill_now();
    if (fd_ >= 0) ::close(fd_);
}

bool Child::start(const std::vector<std::string>& argv) {
    if (argv.empty()) {
        result_.error = "no program";
        return false;
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        result_.error = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group, so a kill reaches whatever it started.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        result_.error = "cannot start " + argv[0] + ": " + std::strerror(rc);
        return false;
    }
    pid_ = pid;
    fd_ = fds[0];
    return true;
}

bool Child::read_some(Deadline deadline) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, ms_until(deadline));
    if (n <= 0) return true;  // nothing yet (or EINTR): not the end
    char buf[4096];
    const ssize_t got = ::read(fd_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) return true;
    if (got <= 0) {
        ::close(fd_);
        fd_ = -1;
        return false;
    }
    if (result_.output.size() < kMaxOutput)
        result_.output.append(buf, std::min(static_cast<size_t>(got), kMaxOutput - result_.output.size()));
    return true;
}

bool Child::wait_for_output(const std::string& text, Deadline deadline) {
    while (result_.output.find(text) == std::string::npos) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        if (!read_some(deadline)) return result_.output.find(text) != std::string::npos;
    }
    return true;
}

void Child::reap(bool block) {
    if (pid_ <= 0) return;
    int status = 0;
    pid_t r;
    do {
        r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
        result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pid_ = -1;
    }
}

ChildResult Child::wait(Deadline deadline) {
    // Output first: its EOF is the end (or a grandchild holding the pipe,
    // which the deadline settles).
    while (fd_ >= 0 && std::chrono::steady_clock::now() < deadline) read_some(deadline);
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
        reap(false);
        if (pid_ > 0) ::usleep(20 * 1000);
    }
    if (pid_ > 0 || fd_ >= 0) {
        result_.timed_out = true;
        return kill_now();
    }
    return result_;
}

ChildResult Child::kill_now() {
    if (pid_ > 0) {
        ::kill(-pid_, SIGKILL);
        ::kill(pid_, SIGKILL);
        reap(true);
        result_.exit_code = -1;
    }
    if (fd_ >= 0) {
        // What it wrote before the kill is still worth reading, for a
        // moment: a grandchild outside its group may hold the pipe open.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        while (std::chrono::steady_clock::now() < until && read_some(until)) {
        }
        if (fd_ >= 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    return result_;
}

ChildResult run_child(const std::vector<std::string>& argv, Child::Deadline deadline) {
    Child c;
    if (!c.start(argv)) {
        ChildResult r;
        r.error = c.error();
        return r;
    }
    return c.wait(deadline);
}

}  // namespace kiln::smoke
