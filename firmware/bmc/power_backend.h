// Where an emulated host's power lives. Without a backend, PowerState is a
// property in the tree that Reset rewrites; with one (libvirt_power.h), the
// power state is read from a real VM and Reset acts on it, as sushy-tools
// does for Ironic.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::bmc {

class PowerBackend {
public:
    virtual ~PowerBackend() = default;
    // "On", "Off", "Paused", "PoweringOn", "PoweringOff".
    virtual Result<std::string> power_state() = 0;
    // A Redfish ResetType, already checked against the allowed values.
    virtual Status reset(const std::string& reset_type) = 0;
    virtual std::string describe() const = 0;  // "libvirt qemu:///system domain lab-gpu-01"
};

}  // namespace kiln::bmc
