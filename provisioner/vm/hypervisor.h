// The hypervisor a node's VMs run on, as the vm stage needs it: define,
// start, stop, undefine and look up domains by name, and read what a
// guest wrote to its serial console or, through its agent, to a file. LibvirtHypervisor (libvirt's C API,
// local or qemu+ssh://) is the real one; tests/vm/fake_hypervisor.h fakes
// it for unit tests. No virsh anywhere in the product.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::vm {

enum class DomainState { shutoff, running, paused, other };
const char* state_name(DomainState s);

struct DomainInfo {
    std::string name;
    DomainState state = DomainState::other;
    bool persistent = false;  // defined, not just running
};

class Hypervisor {
public:
    virtual ~Hypervisor() = default;

    virtual std::string uri() const = 0;
    // Defines (or redefines, same name and UUID) a persistent domain.
    virtual Status define(const std::string& xml) = 0;
    virtual Status start(const std::string& name) = 0;
    // Powers off at once (the guests are disposable; the disk is an overlay).
    virtual Status stop(const std::string& name) = 0;
    // Removes the definition; a running domain must be stopped first.
    virtual Status undefine(const std::string& name) = 0;
    // nullopt when no domain has this name.
    virtual Result<std::optional<DomainInfo>> lookup(const std::string& name) = 0;
    // The persistent (inactive) definition as libvirt stores it.
    virtual Result<std::string> definition(const std::string& name) = 0;
    virtual Result<std::vector<std::string>> list_names() = 0;
    // Everything the guest has written to its first serial port since it
    // last started (the domain's <serial><log file=...>).
    virtual Result<std::string> serial_output(const std::string& name) = 0;
    // A small file inside the running guest, read through the QEMU guest
    // agent (which, unlike the serial log, works on a remote connection).
    // Error code "agent" when the agent cannot answer yet or the file is
    // not there: a guest still booting.
    virtual Result<std::string> guest_file(const std::string& name, const std::string& path) = 0;
};

}  // namespace kiln::vm
