// The lifecycle of a node's VMs on its hypervisor: define, start, wait for
// readiness, stop, undefine, reimage (a new overlay on the cached image,
// same domain name and UUID) and teardown. Every step is idempotent: start
// of a running domain, stop of a stopped one and undefine of an absent one
// succeed without doing anything, so a re-run after a crash finishes the
// job.
#pragma once

#include <string>
#include <vector>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"
#include "provisioner/vm/hypervisor.h"
#include "provisioner/vm/readiness.h"

namespace kiln::vm {

// Where a domain's files live under a node's VM folder.
struct VmFiles {
    std::string overlay;     // <dir>/<domain>.qcow2
    std::string seed_iso;    // <dir>/<domain>-seed.iso
    std::string serial_log;  // <dir>/<domain>.serial.log
};
VmFiles vm_files(const std::string& dir, const std::string& domain);

class DomainManager {
public:
    DomainManager(Hypervisor& hv, CommandRunner& runner) : hv_(hv), runner_(runner) {}

    Hypervisor& hypervisor() { return hv_; }

    Status define(const std::string& xml) { return hv_.define(xml); }
    Status start(const std::string& name);
    Result<ReadyMarker> wait_ready(const std::string& name, const ReadyWait& wait) {
        return vm::wait_ready(hv_, name, wait);
    }
    Status stop(const std::string& name);
    // Stops it first; an absent domain is fine.
    Status undefine(const std::string& name);
    // Stops the domain, puts a fresh overlay on `base` at `overlay`, and
    // starts it again when `start_after`. The definition is untouched.
    Status reimage(const std::string& name, const std::string& base, const std::string& overlay, bool start_after);
    // Stops and undefines every domain whose name starts with `prefix`;
    // the names removed.
    Result<std::vector<std::string>> teardown(const std::string& prefix);

private:
    Hypervisor& hv_;
    CommandRunner& runner_;
};

}  // namespace kiln::vm
