#include "provisioner/vm/nccl_topo.h"

#include <cstdio>

#include "provisioner/vm/guest_pci_layout.h"
#include "provisioner/vm/xml_writer.h"

namespace kiln::vm {

namespace {

std::string hex(unsigned v, int width) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*x", width, v);
    return buf;
}

// The link NCCL should weigh paths by: what the link can do
// (max_link_*), since an idle GPU trains down to 2.5 GT/s; the current
// figures only where the capability is not reported. A VF has no link of its
// own (Linux reads "Unknown" and 0): its PF's is the one it uses.
void add_link(const HostTopology& host, const PciDevice& d, XmlWriter::Attrs& attrs) {
    const PciDevice* src = &d;
    if (d.is_vf()) {
        if (const PciDevice* pf = host.device(d.physfn)) src = pf;
    }
    const std::string& speed = src->max_link_speed.empty() ? src->link_speed : src->max_link_speed;
    const std::optional<int>& width = src->max_link_width ? src->max_link_width : src->link_width;
    if (!speed.empty()) attrs.emplace_back("link_speed", speed);
    if (width) attrs.emplace_back("link_width", std::to_string(*width));
}

XmlWriter::Attrs pci_attrs(const HostTopology& host, const std::string& guest, const PciDevice& d) {
    XmlWriter::Attrs a = {
        {"busid", guest}, {"class", hex(d.class_code, 6)}, {"vendor", hex(d.vendor, 4)}, {"device", hex(d.device, 4)}};
    add_link(host, d, a);
    return a;
}

}  // namespace

std::string affinity_mask(int first, int count, int total) {
    const int words = total <= 0 ? 1 : (total + 31) / 32;
    std::string out;
    for (int w = words - 1; w >= 0; --w) {
        unsigned bits = 0;
        for (int b = 0; b < 32; ++b) {
            const int cpu = w * 32 + b;
            if (cpu >= first && cpu < first + count) bits |= 1u << b;
        }
        char buf[16];
        std::snprintf(buf, sizeof buf, "%08x", bits);
        if (!out.empty()) out += ',';
        out += buf;
    }
    return out;
}

Result<std::string> nccl_topology(const HostTopology& host, const VmPlacement& vm) {
    for (const auto& d : vm.devices()) {
        if (!host.device(d))
            return make_error("vm", "vm.nccl_topo", "vm " + vm.name + ": device " + d + " is not on this host");
    }
    const GuestPciLayout layout = plan_guest_pci(vm);
    const int total = static_cast<int>(vm.vcpus());
    XmlWriter w;
    w.open("system", {{"version", "1"}});
    int first = 0;
    for (size_t c = 0; c < vm.cells.size(); ++c) {
        const VmCell& cell = vm.cells[c];
        const int n = static_cast<int>(cell.cpus.size());
        w.comment("guest cell " + std::to_string(c) + " = host NUMA node " + std::to_string(cell.host_node));
        XmlWriter::Attrs cpu = {
            {"numaid", std::to_string(c)}, {"affinity", affinity_mask(first, n, total)}, {"arch", "x86_64"}};
        // NCCL tunes for the CPU by these (AMD and Intel P2P limits); the
        // guest runs host-passthrough, so the host's are the guest's.
        if (!host.cpu.vendor.empty()) cpu.emplace_back("vendor", host.cpu.vendor);
        if (host.cpu.familyid >= 0) cpu.emplace_back("familyid", std::to_string(host.cpu.familyid));
        if (host.cpu.modelid >= 0) cpu.emplace_back("modelid", std::to_string(host.cpu.modelid));
        w.open("cpu", cpu);
        first += n;
        for (const auto& s : cell.slots) {
            const GuestDevice* head = layout.device(s.gpus.empty() ? s.nics.front() : s.gpus.front());
            const PciDevice* up = s.host_switch.empty() ? nullptr : host.device(s.host_switch);
            XmlWriter::Attrs sw = {{"busid", head->upstream}, {"class", "0x060400"}};
            if (up) add_link(host, *up, sw);
            if (up) w.comment("host switch " + s.host_switch);
            w.open("pci", sw);
            for (const auto& list : {&s.gpus, &s.nics}) {
                for (const auto& addr : *list) {
                    w.empty("pci", pci_attrs(host, layout.device(addr)->guest, *host.device(addr)));
                }
            }
            w.close();
        }
        for (const auto& nv : cell.nvswitches) {
            w.empty("pci", pci_attrs(host, layout.device(nv)->guest, *host.device(nv)));
        }
        w.close();
    }
    w.close();
    return w.str();
}

}  // namespace kiln::vm
