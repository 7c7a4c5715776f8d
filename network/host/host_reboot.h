// Rebooting a GPU host and waiting for it to come back, over the host's
// CommandRunner (an SshRunner in the product).
//
// The reboot is `systemctl reboot` (kRebootArgv, the one place it is
// chosen): a clean shutdown through systemd, which every host image kiln
// builds runs. The SSH connection that carries it may drop before the
// command answers: any answer, or none, is expected; what proves the reboot
// is the kernel's boot id (/proc/sys/kernel/random/boot_id, new at every
// boot) read before and polled after, until it changes. Every wait is
// bounded: each poll by the command timeout, the whole by `timeout`.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::network::host {

// The command that reboots a host.
extern const std::vector<std::string> kRebootArgv;

struct RebootOptions {
    std::chrono::milliseconds timeout{std::chrono::minutes(15)};  // from the reboot to a new boot id
    std::chrono::milliseconds poll_interval{std::chrono::seconds(10)};
    std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};  // each poll, at most
    // Waits between polls; default sleeps. Returns false to stop (the stage's stop or deadline).
    std::function<bool(std::chrono::milliseconds)> wait;
    std::function<void(const std::string&)> progress;  // "waiting for the host to come back (40s of 900s)"
};

// The host's boot id; an error "network.boot_id_unreadable" when it cannot be read.
Result<std::string> read_boot_id(CommandRunner& runner, std::chrono::milliseconds timeout);

// Reboots the host and returns its new boot id. Errors (domain "network"):
// "network.boot_id_unreadable" (before), "network.reboot_refused" (the command answered a
// clear refusal: not found or not permitted, with the host still up),
// "network.reboot_timeout" (no new boot id within `timeout`), "stopped".
Result<std::string> reboot_and_wait(CommandRunner& runner, const RebootOptions& options);

}  // namespace kiln::network::host
