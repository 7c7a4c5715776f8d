// A PowerBackend on a real libvirt domain (the libvirt C API), as
// sushy-tools backs Ironic's emulated BMCs: PowerState is read from the
// domain, Reset starts, shuts down, destroys or resets it.
#pragma once

#include <memory>
#include <string>

#include "firmware/bmc/power_backend.h"
#include "provisioner/core/result.h"

// libvirt's own names for its opaque handles, declared as libvirt.h does.
typedef struct _virConnect* virConnectPtr;  // NOLINT(bugprone-reserved-identifier)
typedef struct _virDomain* virDomainPtr;    // NOLINT(bugprone-reserved-identifier)

namespace kiln::bmc {

class LibvirtPower : public PowerBackend {
public:
    // Errors (domain "bmc"): "bmc.libvirt_connect", "bmc.libvirt_domain" (no such domain).
    static Result<std::shared_ptr<LibvirtPower>> connect(const std::string& uri, const std::string& domain);
    ~LibvirtPower() override;
    LibvirtPower(const LibvirtPower&) = delete;
    LibvirtPower& operator=(const LibvirtPower&) = delete;

    Result<std::string> power_state() override;
    // Errors: "bmc.libvirt_failed" with libvirt's message.
    Status reset(const std::string& reset_type) override;
    std::string describe() const override;

private:
    LibvirtPower(std::string uri, std::string name, virConnectPtr conn, virDomainPtr dom)
        : uri_(std::move(uri)), name_(std::move(name)), conn_(conn), dom_(dom) {}

    std::string uri_, name_;
    virConnectPtr conn_ = nullptr;
    virDomainPtr dom_ = nullptr;
};

}  // namespace kiln::bmc
