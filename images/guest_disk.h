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

#include "images/image_tree.h"
#include "provisioner/core/result.h"

namespace kiln::images {

class GuestDisk : public ImageTree {
public:
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
    // The mounted image's tree as a tar on the host: numeric owners, xattrs
    // and ACLs kept.
    virtual Status tar_out(const std::string& dir, const std::string& host_tar) = 0;

    // Unmounts, syncs and stops the appliance: every write is on disk.
    virtual Status shutdown() = 0;
};

class GuestDiskFactory {
public:
    virtual ~GuestDiskFactory() = default;
    virtual Result<std::unique_ptr<GuestDisk>> open() = 0;
};

// How long a libguestfs call may block before its appliance is declared
// hung and killed (appliance_watchdog.h): the call then fails with code
// "image.appliance_hung" (transient), which the builder retries once. A launch
// takes about 30 s under TCG; a command gets its own timeout (enforced
// inside the appliance) plus the grace.
struct ApplianceDeadlines {
    std::chrono::milliseconds launch = std::chrono::minutes(5);
    std::chrono::milliseconds command_grace = std::chrono::minutes(2);
};

// The real one: LIBGUESTFS_BACKEND / LIBGUESTFS_BACKEND_SETTINGS from the
// environment (direct + force_tcg where KVM hangs).
class GuestfsDiskFactory : public GuestDiskFactory {
public:
    GuestfsDiskFactory() = default;
    explicit GuestfsDiskFactory(ApplianceDeadlines deadlines) : deadlines_(deadlines) {}
    Result<std::unique_ptr<GuestDisk>> open() override;

private:
    ApplianceDeadlines deadlines_;
};

}  // namespace kiln::images
