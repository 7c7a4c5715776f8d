// The disk customisation side effect behind one small interface (DESIGN §5):
// GuestfsDisk drives a real libguestfs appliance (the C API, one guestfs_h
// in a move-only owner); unit tests use a fake that records the calls.
//
// Facts the real one handles: the disk format is always passed; commands run
// chrooted in the image but under the appliance's kernel; the appliance has
// no network unless asked before launch.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::images {

struct GuestCommandResult {
    int exit_code = 0;
    std::string output;  // stdout and stderr, interleaved
};

class GuestDisk {
public:
    virtual ~GuestDisk() = default;

    // Before launch.
    virtual Status add_drive(const std::string& path, const std::string& format) = 0;
    virtual Status set_network(bool on) = 0;
    virtual Status launch() = 0;

    // Disk layout (the base only).
    virtual Status part_disk_mbr(const std::string& device) = 0;
    virtual Status set_bootable(const std::string& device, int partnum) = 0;
    virtual Status mkfs_ext4(const std::string& partition, const std::string& label, const std::string& uuid) = 0;
    virtual Status write_device(const std::string& device, const std::string& bytes, int64_t offset) = 0;
    virtual Status extlinux(const std::string& dir) = 0;

    virtual Status mount(const std::string& device, const std::string& mountpoint) = 0;
    virtual Status tar_in(const std::string& host_tar, const std::string& dir) = 0;

    // Files inside the mounted image.
    virtual Status mkdir_p(const std::string& path) = 0;
    virtual Status write_file(const std::string& path, const std::string& content, int mode) = 0;
    virtual Status upload(const std::string& host_path, const std::string& path, int mode) = 0;
    virtual Result<std::string> read_file(const std::string& path) = 0;
    virtual Result<std::vector<std::string>> ls(const std::string& dir) = 0;
    virtual bool exists(const std::string& path) = 0;
    virtual Status rm_rf(const std::string& path) = 0;

    // `script` under /bin/sh -e inside the image (chrooted), with `env`
    // exported first; killed after `timeout`. A non-zero exit is a result.
    virtual Result<GuestCommandResult> run(const std::string& script, const std::map<std::string, std::string>& env,
                                           std::chrono::seconds timeout) = 0;

    // Unmounts, syncs and stops the appliance: every write is on disk.
    virtual Status shutdown() = 0;
};

class GuestDiskFactory {
public:
    virtual ~GuestDiskFactory() = default;
    virtual Result<std::unique_ptr<GuestDisk>> open() = 0;
};

// The real one: LIBGUESTFS_BACKEND / LIBGUESTFS_BACKEND_SETTINGS from the
// environment (direct + force_tcg where KVM hangs).
class GuestfsDiskFactory : public GuestDiskFactory {
public:
    Result<std::unique_ptr<GuestDisk>> open() override;
};

}  // namespace kiln::images
