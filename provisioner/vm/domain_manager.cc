#include "provisioner/vm/domain_manager.h"

#include "provisioner/vm/overlay_disk.h"

namespace kiln::vm {

VmFiles vm_files(const std::string& dir, const std::string& domain) {
    const std::string base = dir + "/" + domain;
    return {base + ".qcow2", base + "-seed.iso", base + ".serial.log"};
}

Status DomainManager::start(const std::string& name) {
    auto info = hv_.lookup(name);
    if (!info) return info.error();
    if (!*info) return make_error("vm", "vm.no_domain", "cannot start " + name + ": it is not defined");
    if ((*info)->state == DomainState::running) return ok_status();
    return hv_.start(name);
}

Status DomainManager::stop(const std::string& name) {
    auto info = hv_.lookup(name);
    if (!info) return info.error();
    if (!*info || (*info)->state == DomainState::shutoff) return ok_status();
    return hv_.stop(name);
}

Status DomainManager::undefine(const std::string& name) {
    if (auto s = stop(name); !s) return s;
    return hv_.undefine(name);
}

Status DomainManager::reimage(const std::string& name, const std::string& base, const std::string& overlay,
                              bool start_after) {
    auto info = hv_.lookup(name);
    if (!info) return info.error();
    if (!*info) return make_error("vm", "vm.no_domain", "cannot reimage " + name + ": it is not defined");
    if (auto s = stop(name); !s) return s;
    if (auto s = create_overlay(runner_, base, overlay); !s) return s;
    if (start_after) return hv_.start(name);
    return ok_status();
}

Result<std::vector<std::string>> DomainManager::teardown(const std::string& prefix) {
    auto names = hv_.list_names();
    if (!names) return names.error();
    std::vector<std::string> removed;
    for (const auto& n : *names) {
        if (n.rfind(prefix, 0) != 0) continue;
        if (auto s = undefine(n); !s) return s.error();
        removed.push_back(n);
    }
    return removed;
}

}  // namespace kiln::vm
