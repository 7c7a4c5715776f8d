// Which accelerator a host's guests get: KVM where a probe shows it works,
// TCG otherwise. /dev/kvm existing is not enough (nested or broken KVM can
// hang a guest), so the probe boots the probe guest (probe_guest.h) under
// KVM and requires the readiness marker within a bounded time.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "provisioner/core/result.h"
#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/hypervisor.h"

namespace kiln::vm {

struct ProbeResult {
    Accelerator accelerator = Accelerator::tcg;
    std::string reason;  // why, for the output: "kvm guest ready in 1.2 s", "no /dev/kvm", ...
};

struct ProbeOptions {
    std::string kernel;    // probe guest kernel
    std::string initrd;    // probe guest initramfs
    std::string work_dir;  // for the serial log
    std::string kvm_device = "/dev/kvm";
    std::chrono::milliseconds timeout{std::chrono::seconds(20)};
    std::function<bool(std::chrono::milliseconds)> sleep;  // as ReadyWait::sleep
};

// The probe guest's domain XML (1 vCPU, 128 MiB, no disk, no network).
Result<std::string> probe_domain_xml(const std::string& name, Accelerator accel, const ProbeOptions& options);

// Never fails for KVM trouble (that answers TCG); fails only when the
// hypervisor itself misbehaves. Leaves no domain defined.
Result<ProbeResult> probe_accelerator(Hypervisor& hv, const ProbeOptions& options);

}  // namespace kiln::vm
