// Proves an image boots: QEMU boots it (a throwaway snapshot; the image is
// never written), the serial console goes to a file, and the check waits,
// bounded, for the guest's KILN_READY line (provisioner/vm/guest_contract.h)
// and returns its JSON. A NoCloud seed is attached so cloud-init runs.
//
// KVM is used only when a probe proves it runs guest code here (a 512-byte
// boot sector that writes to the serial port); otherwise TCG. The result
// says which.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::images {

struct BootCheckOptions {
    std::string image;
    std::string format = "qcow2";
    std::string work_dir;  // serial log, seed, probe files go here
    std::chrono::seconds timeout{900};
    std::string accel = "auto";  // auto | kvm | tcg
    std::string qemu = "qemu-system-x86_64";
    int memory_mb = 1024;
    int cpus = 1;
};

struct BootCheckResult {
    std::string accel;         // kvm | tcg
    std::string accel_reason;  // why that one
    std::string serial_log;    // path
    std::string line;          // the KILN_READY line
    nlohmann::json ready;      // its JSON
    double seconds = 0;
};

// True when KVM runs guest code on this machine (bounded probe).
bool probe_kvm(CommandRunner& runner, const std::string& qemu, const std::string& work_dir, std::string* why);

// The JSON of the first KILN_READY line in `serial` (console text), if any.
std::optional<nlohmann::json> find_ready_line(const std::string& serial, std::string* line = nullptr);

Result<BootCheckResult> boot_check(CommandRunner& runner, const BootCheckOptions& options);

}  // namespace kiln::images
