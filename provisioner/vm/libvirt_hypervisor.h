// Hypervisor over libvirt's C API. The connection and every domain handle
// are held by move-only RAII wrappers; libvirt's default error printer is
// silenced and its last error becomes an Error value (domain "libvirt").
#pragma once

#include <memory>
#include <string>

#include "provisioner/vm/hypervisor.h"

namespace kiln::vm {

// The local system daemon.
inline constexpr const char* kDefaultLibvirtUri = "qemu:///system";

class LibvirtHypervisor : public Hypervisor {
public:
    // Opens `uri` ("" = qemu:///system). Remote URIs get a keepalive, so a
    // dead peer fails calls within ~15 s instead of hanging.
    static Result<std::unique_ptr<LibvirtHypervisor>> open(const std::string& uri);
    ~LibvirtHypervisor() override;
    LibvirtHypervisor(const LibvirtHypervisor&) = delete;
    LibvirtHypervisor& operator=(const LibvirtHypervisor&) = delete;

    std::string uri() const override { return uri_; }
    Status define(const std::string& xml) override;
    Status start(const std::string& name) override;
    Status stop(const std::string& name) override;
    Status undefine(const std::string& name) override;
    Result<std::optional<DomainInfo>> lookup(const std::string& name) override;
    Result<std::string> definition(const std::string& name) override;
    Result<std::vector<std::string>> list_names() override;
    Result<std::string> serial_output(const std::string& name) override;
    Result<std::string> guest_file(const std::string& name, const std::string& path) override;

private:
    struct Conn;
    explicit LibvirtHypervisor(std::string uri, std::unique_ptr<Conn> conn);
    std::string uri_;
    std::unique_ptr<Conn> conn_;
};

// The serial log path in a domain definition ("" when it has none).
std::string serial_log_path(const std::string& domain_xml);

}  // namespace kiln::vm
