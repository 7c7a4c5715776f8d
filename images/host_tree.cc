#include "images/host_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace kiln::images {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Runs as root in fresh mount and PID namespaces: mounts what package
// scripts and DKMS expect, then chroots. Its arguments are data ($1 the
// tree, the rest the command), never spliced into the script.
constexpr const char* kChrootWrapper = R"(exec 2>&1 </dev/null
set -e
r=$1; shift
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
exec chroot "$r" "$@")";

Error tree_error(const std::string& code, const std::string& msg) {
    return make_error("image", code, msg);
}

std::string tail_of(const std::string& s, size_t n) {
    return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

char type_of(mode_t m) {
    if (S_ISDIR(m)) return 'd';
    if (S_ISLNK(m)) return 'l';
    if (S_ISCHR(m)) return 'c';
    if (S_ISBLK(m)) return 'b';
    if (S_ISFIFO(m)) return 'p';
    if (S_ISSOCK(m)) return 's';
    return 'f';
}

}  // namespace

Status host_builds_possible() {
    if (::geteuid() != 0)
        return tree_error("image.host_build_needs_root",
                          "a layer with build_in = \"host\" runs chrooted in the image's tree on this machine, which "
                          "needs root (chroot and mounts); run the build as root or set build_in = \"appliance\"");
    return ok_status();
}

Result<CommandResult> HostTree::in_root(std::vector<std::string> argv, const std::string& what) {
    CommandSpec spec;
    spec.argv = {"chroot", root_};
    spec.argv.insert(spec.argv.end(), argv.begin(), argv.end());
    spec.env["PATH"] = kPath;
    spec.env["LC_ALL"] = "C.UTF-8";
    spec.timeout = std::chrono::minutes(5);
    auto r = runner_.run(spec);
    if (!r) return r.error();
    if (!r->success())
        return tree_error("image.host_tree", fmt::format("{} in the image tree {}: {}", what, root_,
                                                         tail_of(r->err.empty() ? r->out : r->err, 2000)));
    return r;
}

std::string HostTree::stage_name() {
    return fmt::format(".kiln-in-{}-{}", ::getpid(), staged_++);
}

Status HostTree::place(const std::string& staged, const std::string& path, int mode) {
    // Written through, as the appliance writes: a symlink at `path` is
    // followed (inside the image) rather than replaced.
    auto r = in_root({"/bin/sh", "-c", "cat -- \"$1\" > \"$2\" && chmod \"$3\" \"$2\"", "sh", "/" + staged, path,
                      fmt::format("{:o}", mode)},
                     "write " + path);
    std::error_code ec;
    fs::remove(fs::path(root_) / staged, ec);
    return r ? ok_status() : Status(r.error());
}

Status HostTree::mkdir_p(const std::string& path) {
    auto r = in_root({"mkdir", "-p", "--", path}, "mkdir " + path);
    return r ? ok_status() : Status(r.error());
}

Status HostTree::write_file(const std::string& path, const std::string& content, int mode) {
    const std::string name = stage_name();
    // A new name at the top of the tree, which is ours: nothing to follow.
    const std::string host = (fs::path(root_) / name).string();
    const int fd = ::open(host.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return tree_error("image.host_tree", fmt::format("cannot create {}: {}", host, std::strerror(errno)));
    size_t off = 0;
    while (off < content.size()) {
        const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int e = errno;
            ::close(fd);
            ::unlink(host.c_str());
            return tree_error(e == ENOSPC ? "image.disk_full" : "image.host_tree",
                              fmt::format("write {}: {}", path, std::strerror(e)));
        }
        off += static_cast<size_t>(n);
    }
    ::close(fd);
    return place(name, path, mode);
}

Status HostTree::upload(const std::string& host_path, const std::string& path, int mode) {
    const std::string name = stage_name();
    std::error_code ec;
    fs::copy_file(host_path, fs::path(root_) / name, ec);
    if (ec) return tree_error("image.host_tree", fmt::format("upload {} -> {}: {}", host_path, path, ec.message()));
    return place(name, path, mode);
}

Result<std::string> HostTree::read_file(const std::string& path) {
    auto r = in_root({"cat", "--", path}, "read " + path);
    if (!r) return r.error();
    return r->out;
}

Result<std::vector<std::string>> HostTree::ls(const std::string& dir) {
    auto r = in_root({"ls", "-A1", "--", dir}, "ls " + dir);
    if (!r) return r.error();
    std::vector<std::string> out;
    std::istringstream in(r->out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(line);
    return out;
}

bool HostTree::exists(const std::string& path) {
    return in_root({"/bin/sh", "-c", "test -e \"$1\" || test -L \"$1\"", "sh", path}, "test " + path).ok();
}

Status HostTree::rm_rf(const std::string& path) {
    auto r = in_root({"rm", "-rf", "--", path}, "rm -rf " + path);
    return r ? ok_status() : Status(r.error());
}

Result<GuestCommandResult> HostTree::run(const std::string& script, const std::map<std::string, std::string>& env,
                                         std::chrono::seconds timeout) {
    // The mount points must be real directories of the tree: a symlink
    // there would aim a mount at the host.
    for (const char* d : {"proc", "sys", "dev"}) {
        const fs::path p = fs::path(root_) / d;
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0) {
            if (::mkdir(p.c_str(), 0755) != 0)
                return tree_error("image.host_tree",
                                  fmt::format("cannot create {}: {}", p.string(), std::strerror(errno)));
        } else if (!S_ISDIR(st.st_mode)) {
            return tree_error("image.host_tree", fmt::format("/{} in the image is not a directory", d));
        }
    }
    CommandSpec spec;
    // --kill-child: when unshare ends (kiln's timeout), its child and with
    // it the whole PID namespace go too; --pdeathsig: unshare ends when
    // kiln does, so a killed build leaves nothing running in its tree.
    spec.argv = {
        "setpriv",      "--pdeathsig",  "KILL",          "unshare",      "--mount", "--pid",
        "--fork",       "--kill-child", "--propagation", "private",      "/bin/sh", "-c",
        kChrootWrapper, "kiln-chroot",  root_,           "/usr/bin/env", "-i",      std::string("PATH=") + kPath,
        "HOME=/root"};
    for (const auto& [k, v] : env) spec.argv.push_back(k + "=" + v);
    spec.argv.insert(spec.argv.end(), {"/bin/sh", "-e", "-c", script});
    spec.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    auto r = runner_.run(spec);
    if (!r) return r.error();
    GuestCommandResult out;
    out.output = r->out + r->err;
    out.exit_code = r->timed_out ? 124 : r->signal ? 128 + r->signal : r->exit_code;
    return out;
}

Result<TreeSnapshot> snapshot_tree(const std::string& root) {
    TreeSnapshot snap;
    std::error_code ec;
    fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
    if (ec) return tree_error("image.host_tree", fmt::format("cannot read {}: {}", root, ec.message()));
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) return tree_error("image.host_tree", fmt::format("cannot read {}: {}", root, ec.message()));
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0) continue;  // gone meanwhile
        // Lexically: fs::relative would resolve the image's absolute
        // symlinks against the host.
        snap[it->path().lexically_relative(root).string()] =
            TreeEntry{type_of(st.st_mode), static_cast<uint64_t>(st.st_ino),
                      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
    }
    return snap;
}

TreeDelta diff_trees(const TreeSnapshot& before, const TreeSnapshot& after) {
    TreeDelta d;
    std::set<std::string> removed;
    auto under_removed = [&](const std::string& p) {
        for (size_t at = p.find('/'); at != std::string::npos; at = p.find('/', at + 1))
            if (removed.count(p.substr(0, at))) return true;
        return false;
    };
    for (const auto& [path, was] : before) {
        auto now = after.find(path);
        if ((now == after.end() || now->second.type != was.type) && !under_removed(path)) {
            removed.insert(path);
            d.removed.push_back(path);
        }
    }
    for (const auto& [path, now] : after) {
        if (now.type == 's') continue;  // a daemon's socket: not part of an image
        auto was = before.find(path);
        if (was == before.end() || !(was->second == now)) d.changed.push_back(path);
    }
    return d;
}

}  // namespace kiln::images
