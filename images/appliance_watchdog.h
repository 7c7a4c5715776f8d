// A libguestfs call that never returns holds a build (and CI) forever: the
// appliance's kernel can spin under TCG before or inside its first command.
// The watchdog bounds one call: past its deadline it kills the appliance's
// qemu, found by the drive path on its command line (unique per build), so
// the blocked call returns an error and the build can name the hang.
//
// Finding qemu by its drive rather than through guestfs_get_pid: calls on one
// handle are serialised by libguestfs's own lock, so a second thread cannot
// ask the handle while the hung call holds it; and the path works for the
// direct and the libvirt backends alike (root can kill either qemu).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kiln::images {

// The qemu processes whose command line names `drive_path` (any qemu-system
// binary, any parent).
std::vector<pid_t> appliance_processes(const std::string& drive_path);

// Arms on construction, disarms on destruction. Past `deadline` it kills
// every appliance process of `drive_path` (looking again every 100 ms, as
// qemu may not have started yet) until the guarded call returns.
class ApplianceWatchdog {
public:
    ApplianceWatchdog(std::string drive_path, std::chrono::milliseconds deadline);
    ~ApplianceWatchdog();
    ApplianceWatchdog(const ApplianceWatchdog&) = delete;
    ApplianceWatchdog& operator=(const ApplianceWatchdog&) = delete;

    // The pid it killed, if it fired. Call after the guarded call returned.
    std::optional<pid_t> killed() const;

private:
    void watch();

    const std::string drive_path_;
    const std::chrono::milliseconds deadline_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::optional<pid_t> killed_;
    std::thread thread_;
};

}  // namespace kiln::images
