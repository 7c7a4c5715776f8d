#include "network/ssh_control.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "provisioner/core/command.h"

namespace kiln::network {

namespace {

// Longest base directory used: the socket path (base + "/kiln-ssh-XXXXXX/c<n>-<g>"
// plus the ".<16 random>" ssh adds while binding) must stay under ~104 bytes.
constexpr size_t kMaxBaseLength = 48;

struct Socket {
    int id = 0;
    int generation = 0;
};

struct ControlState {
    std::mutex mu;
    std::string dir;  // "" until first use
    int next_id = 0;
    std::map<std::string, Socket> current;      // connection key -> socket in use
    std::map<std::string, std::string> issued;  // every path handed out -> its ssh program
    bool exit_hook = false;
    pid_t owner = 0;  // the process that made the directory
};

// Never destroyed: close_ssh_masters() runs from atexit, after static
// destructors may have begun.
ControlState& state() {
    static auto* s = new ControlState;
    return *s;
}

std::string base_dir() {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    struct stat st {};
    // '%' would be read by ssh as a ControlPath token.
    if (xdg && xdg[0] == '/' && std::string(xdg).size() <= kMaxBaseLength &&
        std::string(xdg).find('%') == std::string::npos && ::stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
        ::access(xdg, W_OK | X_OK) == 0)
        return xdg;
    return "/tmp";
}

// mkdtemp makes the directory with a random name and mode 0700; the chmod
// states that mode rather than rely on it.
std::string make_private_dir() {
    for (const std::string& base : {base_dir(), std::string("/tmp")}) {
        std::string tmpl = base + "/kiln-ssh-XXXXXX";
        if (::mkdtemp(tmpl.data()) == nullptr) continue;
        if (::chmod(tmpl.c_str(), 0700) != 0) {
            ::rmdir(tmpl.c_str());
            continue;
        }
        return tmpl;
    }
    return "";
}

// A child forked without exec that calls exit() inherits the hook but not the
// masters: only the process that made the directory closes them.
void close_at_exit() {
    if (state().owner == ::getpid()) close_ssh_masters();
}

std::string socket_path(const std::string& dir, const Socket& s) {
    return dir + "/c" + std::to_string(s.id) + "-" + std::to_string(s.generation);
}

}  // namespace

std::string ssh_control_socket(const std::string& connection_key, const std::string& ssh_program) {
    ControlState& s = state();
    std::lock_guard lock(s.mu);
    if (s.dir.empty()) {
        s.dir = make_private_dir();
        if (s.dir.empty()) return "";
        s.owner = ::getpid();
        if (!s.exit_hook) s.exit_hook = std::atexit(close_at_exit) == 0;
    }
    auto [it, added] = s.current.try_emplace(connection_key);
    if (added) it->second.id = s.next_id++;
    std::string path = socket_path(s.dir, it->second);
    s.issued.try_emplace(path, ssh_program);
    return path;
}

void retire_ssh_control_socket(const std::string& connection_key) {
    ControlState& s = state();
    std::lock_guard lock(s.mu);
    if (auto it = s.current.find(connection_key); it != s.current.end()) ++it->second.generation;
}

std::string ssh_control_dir() {
    ControlState& s = state();
    std::lock_guard lock(s.mu);
    return s.dir;
}

void close_ssh_masters() {
    ControlState& s = state();
    std::lock_guard lock(s.mu);
    if (s.dir.empty()) return;
    ProcessRunner local;
    for (const auto& [path, program] : s.issued) {
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        // The master answers on its socket without asking the remote side,
        // so this is quick; the deadline bounds a master that hangs.
        CommandSpec spec;
        spec.argv = {program, "-F", "none", "-o", "ControlPath=" + path, "-O", "exit", "kiln-ssh-control"};
        spec.timeout = std::chrono::seconds(3);
        spec.kill_grace = std::chrono::seconds(1);
        spec.max_output = 4096;
        (void)local.run(spec);
    }
    // Whatever is left (a socket whose master did not answer, ssh's
    // temporary link names) is ours alone: remove it all.
    if (DIR* d = ::opendir(s.dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name != "." && name != "..") ::unlink((s.dir + "/" + name).c_str());
        }
        ::closedir(d);
    }
    ::rmdir(s.dir.c_str());
    s.dir.clear();
    s.current.clear();
    s.issued.clear();
}

}  // namespace kiln::network
