#include "provisioner/vm/accelerator_probe.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "provisioner/vm/domain_manager.h"
#include "provisioner/vm/readiness.h"

namespace kiln::vm {

Result<std::string> probe_domain_xml(const std::string& name, Accelerator accel, const ProbeOptions& o) {
    HostTopology host;
    NumaNode n;
    n.id = 0;
    n.cpus = {0};
    host.nodes.push_back(n);
    VmPlacement vm;
    vm.name = "probe";
    VmCell cell;
    cell.host_node = 0;
    cell.cpus = {0};
    cell.memory_kib = uint64_t{128} * 1024;
    vm.cells.push_back(cell);
    DomainOptions opt;
    opt.name = name;
    opt.accelerator = accel;
    opt.hugepages = false;
    opt.pin = false;
    opt.guest_agent = false;
    opt.net = NetBackend::none;
    opt.direct_boot = DirectBoot{o.kernel, o.initrd, "console=ttyS0 panic=-1 quiet"};
    opt.serial_log = o.work_dir + "/" + name + ".serial.log";
    return domain_xml(host, vm, opt);
}

Result<ProbeResult> probe_accelerator(Hypervisor& hv, const ProbeOptions& o) {
    std::error_code ec;
    if (!std::filesystem::exists(o.kvm_device, ec)) return ProbeResult{Accelerator::tcg, "no " + o.kvm_device};
    const std::string name = "kiln-accel-probe-" + std::to_string(::getpid());
    auto xml = probe_domain_xml(name, Accelerator::kvm, o);
    if (!xml) return xml.error();
    ProcessRunner runner;  // unused by stop/undefine
    DomainManager dm(hv, runner);
    if (auto s = dm.undefine(name); !s) return s.error();
    if (auto s = hv.define(*xml); !s) return ProbeResult{Accelerator::tcg, "kvm domain refused: " + s.error().message};
    ProbeResult out;
    const auto t0 = std::chrono::steady_clock::now();
    if (auto s = hv.start(name); !s) {
        out = {Accelerator::tcg, "kvm guest did not start: " + s.error().message};
    } else {
        ReadyWait w;
        w.timeout = o.timeout;
        w.poll = std::chrono::milliseconds(100);
        w.sleep = o.sleep;
        auto r = wait_ready(hv, name, w);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f s", secs);
        if (r) {
            out = {Accelerator::kvm, std::string("kvm probe guest ready in ") + buf};
        } else {
            out = {Accelerator::tcg, "kvm probe guest not ready: " + r.error().message};
        }
    }
    if (auto s = dm.undefine(name); !s) return s.error();
    std::filesystem::remove(o.work_dir + "/" + name + ".serial.log", ec);
    return out;
}

}  // namespace kiln::vm
