// An image's root filesystem unpacked in a directory of the build host, for
// layers with build_in = "host" (docs/images.md): their apt installs and
// commands run chrooted in it at native speed (DKMS compiles the NVIDIA
// driver in minutes here, in hours inside an emulated appliance), and only
// what changed goes back into the layer's overlay.
//
// Facts it handles:
// - every path is resolved by a process chrooted in the tree, never by the
//   host, so an absolute symlink in the image cannot point a write at the
//   build host;
// - commands get /proc, /sys and /dev in a private mount and PID namespace
//   (unshare): nothing is mounted in the host's namespace, so removing the
//   tree can never reach the host's /dev, and a daemon a package starts
//   dies with the command;
// - it needs root (chroot, mount).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "images/image_tree.h"
#include "provisioner/core/command.h"

namespace kiln::images {

class HostTree : public ImageTree {
public:
    // `root`: an existing directory holding the image's tree.
    HostTree(CommandRunner& runner, std::string root) : runner_(runner), root_(std::move(root)) {}
    const std::string& root() const { return root_; }

    Status mkdir_p(const std::string& path) override;
    Status write_file(const std::string& path, const std::string& content, int mode) override;
    Status upload(const std::string& host_path, const std::string& path, int mode) override;
    Result<std::string> read_file(const std::string& path) override;
    Result<std::vector<std::string>> ls(const std::string& dir) override;
    bool exists(const std::string& path) override;
    Status rm_rf(const std::string& path) override;
    Result<GuestCommandResult> run(const std::string& script, const std::map<std::string, std::string>& env,
                                   std::chrono::seconds timeout) override;

private:
    // argv run chrooted in the tree (no mounts), for file operations.
    Result<CommandResult> in_root(std::vector<std::string> argv, const std::string& what);
    // Places a host file's bytes at `path` in the image with `mode`.
    Status place(const std::string& staged, const std::string& path, int mode);
    std::string stage_name();

    CommandRunner& runner_;
    std::string root_;
    int staged_ = 0;
};

// Refuses, with the reason, when this process cannot build on the host.
Status host_builds_possible();

// What a tree holds, to find what a layer changed: path (relative, no
// leading '/') -> type, inode and change time. Every write, chmod, chown,
// rename or link changes an inode's ctime, so (ino, ctime) catches all.
struct TreeEntry {
    char type = 'f';  // f d l c b p s
    uint64_t ino = 0;
    int64_t ctime_ns = 0;
    bool operator==(const TreeEntry&) const = default;
};
using TreeSnapshot = std::map<std::string, TreeEntry>;

Result<TreeSnapshot> snapshot_tree(const std::string& root);

struct TreeDelta {
    std::vector<std::string> changed;  // new or changed, parents before children (tar them, no recursion)
    std::vector<std::string> removed;  // gone, or replaced by another type (remove before untarring)
};
TreeDelta diff_trees(const TreeSnapshot& before, const TreeSnapshot& after);

}  // namespace kiln::images
