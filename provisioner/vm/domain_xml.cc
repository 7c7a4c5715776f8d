#include "provisioner/vm/domain_xml.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "provisioner/core/sha256.h"
#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/guest_pci_layout.h"
#include "provisioner/vm/sysfs_reader.h"
#include "provisioner/vm/xml_writer.h"

namespace kiln::vm {

namespace {

using Attrs = XmlWriter::Attrs;

Error fail(const std::string& vm, const std::string& why) {
    return make_error("vm", "vm.domain", "vm " + vm + ": " + why);
}

std::string hex(unsigned v, int width) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*x", width, v);
    return buf;
}

// libvirt <address> attributes of a guest PCI slot.
Attrs guest_address(int bus, int slot, int function = 0, bool multifunction = false) {
    Attrs a = {{"type", "pci"},
               {"domain", "0x0000"},
               {"bus", hex(static_cast<unsigned>(bus), 2)},
               {"slot", hex(static_cast<unsigned>(slot), 2)},
               {"function", "0x" + std::to_string(function)}};
    if (multifunction) a.emplace_back("multifunction", "on");
    return a;
}

// <source><address .../> of a host function "dddd:bb:dd.f".
Attrs host_address(const std::string& bdf) {
    return {{"domain", "0x" + bdf.substr(0, 4)},
            {"bus", "0x" + bdf.substr(5, 2)},
            {"slot", "0x" + bdf.substr(8, 2)},
            {"function", "0x" + bdf.substr(11, 1)}};
}

}  // namespace

const char* accelerator_name(Accelerator a) {
    return a == Accelerator::kvm ? "kvm" : "tcg";
}

const char* domain_type(Accelerator a) {
    return a == Accelerator::kvm ? "kvm" : "qemu";
}

const char* net_backend_name(NetBackend n) {
    switch (n) {
        case NetBackend::none:
            return "none";
        case NetBackend::slirp:
            return "slirp";
        case NetBackend::passt:
            return "passt";
    }
    return "?";
}

std::string uuid_from_name(const std::string& name) {
    std::string h = sha256_hex("kiln-domain:" + name).substr(0, 32);
    h[12] = '4';                                                  // version 4 layout
    h[16] = "89ab"[std::stoi(h.substr(16, 1), nullptr, 16) & 3];  // RFC 4122 variant
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
           h.substr(20, 12);
}

std::string mac_from_name(const std::string& name) {
    const std::string h = sha256_hex("kiln-mac:" + name);
    return "52:54:00:" + h.substr(0, 2) + ":" + h.substr(2, 2) + ":" + h.substr(4, 2);
}

namespace {

// An attribute of kiln's metadata element. libvirt re-serializes metadata
// with its own quoting: accept both.
std::string stamped_attr(const std::string& xml, const std::string& attr) {
    const size_t tag = xml.find("<kiln:vm ");
    if (tag == std::string::npos) return "";
    const size_t end = xml.find('>', tag);
    const std::string key = " " + attr + "=";
    const size_t h = xml.find(key, tag);
    const size_t q = h + key.size();
    if (h == std::string::npos || h > end || q + 1 > xml.size()) return "";
    const char quote = xml[q];
    if (quote != '"' && quote != '\'') return "";
    const size_t close = xml.find(quote, q + 1);
    if (close == std::string::npos || close > end) return "";
    return xml.substr(q + 1, close - q - 1);
}

}  // namespace

std::string stamped_hash(const std::string& xml) {
    return stamped_attr(xml, "hash");
}
std::string stamped_base(const std::string& xml) {
    return stamped_attr(xml, "base");
}

bool wants_viommu(const VmPlacement& vm, Viommu mode) {
    if (mode != Viommu::automatic) return mode == Viommu::on;
    for (const auto& c : vm.cells) {
        for (const auto& s : c.slots) {
            if (!s.gpus.empty() && !s.nics.empty()) return true;
        }
    }
    return false;
}

DomainOptions domain_options(const Placement& placement, const std::string& name) {
    DomainOptions o;
    o.name = name;
    o.hugepages = placement.request.hugepages;
    o.hugepage_kib = placement.request.hugepage_kib;
    return o;
}

Result<std::string> domain_xml(const HostTopology& host, const VmPlacement& vm, const DomainOptions& opt) {
    if (opt.name.empty()) return fail(vm.name, "the domain has no name");
    if (vm.cells.empty()) return fail(vm.name, "no NUMA cells");
    std::set<int> host_nodes;
    for (const auto& c : vm.cells) {
        if (!host.node(c.host_node))
            return fail(vm.name, "cell on host node " + std::to_string(c.host_node) + ", which the host lacks");
        if (c.cpus.empty()) return fail(vm.name, "cell on host node " + std::to_string(c.host_node) + " has no CPUs");
        if (c.memory_kib == 0)
            return fail(vm.name, "cell on host node " + std::to_string(c.host_node) + " has no memory");
        if (opt.hugepages && c.hugepages == 0) {
            return fail(vm.name, "hugepages asked but none placed on host node " + std::to_string(c.host_node));
        }
        host_nodes.insert(c.host_node);
    }
    for (const auto& d : vm.devices()) {
        if (!host.device(d)) return fail(vm.name, "device " + d + " is not on this host");
    }
    std::vector<int> node_list(host_nodes.begin(), host_nodes.end());
    const std::string all_nodes = format_cpulist(node_list);
    const GuestPciLayout layout = plan_guest_pci(vm);
    const bool viommu = wants_viommu(vm, opt.viommu);
    const size_t vcpus = vm.vcpus();

    XmlWriter w;
    Attrs root = {{"type", domain_type(opt.accelerator)}};
    if (opt.net == NetBackend::slirp) root.emplace_back("xmlns:qemu", "http://libvirt.org/schemas/domain/qemu/1.0");
    w.open("domain", root);
    w.text("name", opt.name);
    w.text("uuid", opt.uuid.empty() ? uuid_from_name(opt.name) : opt.uuid);
    w.text("description", "kiln vm " + vm.name + " (accelerator " + accelerator_name(opt.accelerator) + ")");
    if (!opt.desired_hash.empty()) {
        w.open("metadata");
        Attrs meta = {{"xmlns:kiln", kKilnXmlns}, {"hash", opt.desired_hash}, {"placement", vm.name}};
        if (!opt.base_identity.empty()) meta.emplace_back("base", opt.base_identity);
        w.empty("kiln:vm", meta);
        w.close();
    }
    w.text("memory", std::to_string(vm.memory_kib()), {{"unit", "KiB"}});
    w.text("currentMemory", std::to_string(vm.memory_kib()), {{"unit", "KiB"}});
    std::vector<int> cells;
    for (size_t i = 0; i < vm.cells.size(); ++i) cells.push_back(static_cast<int>(i));
    const std::string cell_ids = format_cpulist(cells);  // guest cells the pages back
    if (opt.hugepages) {
        w.open("memoryBacking");
        w.open("hugepages");
        w.empty("page", {{"size", std::to_string(opt.hugepage_kib)}, {"unit", "KiB"}, {"nodeset", cell_ids}});
        w.close();
        w.empty("locked");
        w.close();
    }
    w.text("vcpu", std::to_string(vcpus), {{"placement", "static"}});
    if (opt.pin) {
        w.open("cputune");
        int v = 0;
        std::vector<int> all_cpus;
        for (const auto& c : vm.cells) {
            for (int cpu : c.cpus) {
                w.empty("vcpupin", {{"vcpu", std::to_string(v++)}, {"cpuset", std::to_string(cpu)}});
                all_cpus.push_back(cpu);
            }
        }
        std::sort(all_cpus.begin(), all_cpus.end());
        w.empty("emulatorpin", {{"cpuset", format_cpulist(all_cpus)}});
        w.close();
        w.open("numatune");
        w.empty("memory", {{"mode", "strict"}, {"nodeset", all_nodes}});
        for (size_t i = 0; i < vm.cells.size(); ++i) {
            w.empty("memnode", {{"cellid", std::to_string(i)},
                                {"mode", "strict"},
                                {"nodeset", std::to_string(vm.cells[i].host_node)}});
        }
        w.close();
    }
    w.open("os");
    w.text("type", "hvm", {{"arch", "x86_64"}, {"machine", "q35"}});
    if (opt.direct_boot) {
        w.text("kernel", opt.direct_boot->kernel);
        if (!opt.direct_boot->initrd.empty()) w.text("initrd", opt.direct_boot->initrd);
        w.text("cmdline", opt.direct_boot->cmdline);
    } else {
        w.empty("boot", {{"dev", "hd"}});
    }
    w.close();
    w.open("features");
    w.empty("acpi");
    w.empty("apic");
    if (viommu) w.empty("ioapic", {{"driver", "qemu"}});
    w.close();
    const std::string cpu_mode =
        !opt.cpu_mode.empty() ? opt.cpu_mode : (opt.accelerator == Accelerator::kvm ? "host-passthrough" : "maximum");
    Attrs cpu_attrs = {{"mode", cpu_mode}};
    if (cpu_mode != "custom") cpu_attrs.emplace_back("check", "none");
    w.open("cpu", cpu_attrs);
    w.open("numa");
    {
        int v = 0;
        for (size_t i = 0; i < vm.cells.size(); ++i) {
            const auto& c = vm.cells[i];
            const int first = v;
            v += static_cast<int>(c.cpus.size());
            const std::string cpus = std::to_string(first) + (c.cpus.size() > 1 ? "-" + std::to_string(v - 1) : "");
            Attrs cell = {
                {"id", std::to_string(i)}, {"cpus", cpus}, {"memory", std::to_string(c.memory_kib)}, {"unit", "KiB"}};
            w.empty("cell", cell);
        }
    }
    w.close();
    w.close();
    w.empty("clock", {{"offset", "utc"}});
    w.text("on_poweroff", "destroy");
    w.text("on_reboot", "restart");
    w.text("on_crash", "destroy");

    w.open("devices");
    if (!opt.disk.empty()) {
        w.open("disk", {{"type", "file"}, {"device", "disk"}});
        w.empty("driver", {{"name", "qemu"}, {"type", "qcow2"}, {"discard", "unmap"}});
        w.empty("source", {{"file", opt.disk}});
        w.empty("target", {{"dev", "vda"}, {"bus", "virtio"}});
        w.close();
    }
    if (!opt.seed_iso.empty()) {
        w.open("disk", {{"type", "file"}, {"device", "cdrom"}});
        w.empty("driver", {{"name", "qemu"}, {"type", "raw"}});
        w.empty("source", {{"file", opt.seed_iso}});
        w.empty("target", {{"dev", "sda"}, {"bus", "sata"}});
        w.empty("readonly");
        w.close();
    }
    w.empty("controller", {{"type", "pci"}, {"index", "0"}, {"model", "pcie-root"}});
    for (const auto& c : layout.controllers) {
        if (c.model == "pcie-expander-bus") {
            w.comment("guest cell " + std::to_string(c.cell) + " = host NUMA node " +
                      std::to_string(vm.cells[static_cast<size_t>(c.cell)].host_node));
        } else if (c.model == "pcie-switch-upstream-port") {
            w.comment(c.host_switch.empty() ? "switch for devices on host root ports"
                                            : "mirrors host switch " + c.host_switch);
        }
        w.open("controller", {{"type", "pci"}, {"index", std::to_string(c.index)}, {"model", c.model}});
        if (c.model == "pcie-expander-bus") {
            w.empty("model", {{"name", "pxb-pcie"}});
            w.open("target", {{"busNr", std::to_string(c.bus_nr)}});
            w.text("node", std::to_string(c.cell));
            w.close();
        } else if (c.model == "pcie-root-port") {
            w.empty("model", {{"name", "pcie-root-port"}});
            w.empty("target", {{"chassis", std::to_string(c.index)}, {"port", hex(static_cast<unsigned>(c.slot), 1)}});
        } else if (c.model == "pcie-switch-upstream-port") {
            w.empty("model", {{"name", "x3130-upstream"}});
        } else {
            w.empty("model", {{"name", "xio3130-downstream"}});
            w.empty("target", {{"chassis", std::to_string(c.index)}, {"port", hex(static_cast<unsigned>(c.slot), 1)}});
        }
        w.empty("address", guest_address(c.parent, c.slot));
        w.close();
    }
    for (const auto& d : layout.devices) {
        const PciDevice* pd = host.device(d.host);
        w.comment(pd->label() + " -> guest " + d.guest);
        w.open("hostdev", {{"mode", "subsystem"}, {"type", "pci"}, {"managed", "yes"}});
        w.open("source");
        w.empty("address", host_address(d.host));
        w.close();
        w.empty("address", guest_address(d.port, 0, d.function, d.multifunction));
        w.close();
    }
    if (opt.net == NetBackend::passt) {
        w.open("interface", {{"type", "user"}});
        w.empty("backend", {{"type", "passt"}});
        w.empty("model", {{"type", "virtio"}});
        if (opt.smoke_host_port > 0) {
            w.open("portForward", {{"proto", "tcp"}, {"address", "127.0.0.1"}});
            w.empty("range", {{"start", std::to_string(opt.smoke_host_port)}, {"to", std::to_string(kGuestSmokePort)}});
            w.close();
        }
        if (opt.rdma_host_port > 0) {
            w.open("portForward", {{"proto", "tcp"}, {"address", "127.0.0.1"}});
            w.empty("range", {{"start", std::to_string(opt.rdma_host_port)}, {"to", std::to_string(kGuestRdmaPort)}});
            w.close();
        }
        w.close();
    }
    if (!opt.fabric_bridge.empty()) {
        // The lab's stand-in for a passed-through fabric NIC: libvirt puts it
        // on a root port of its own, so the guest enumerates it after the
        // user-networking NIC on pcie.0 (eth1 beside eth0).
        w.comment("emulated fabric NIC (rehearsal): Soft-RoCE runs over it in the guest");
        w.open("interface", {{"type", "bridge"}});
        w.empty("mac", {{"address", opt.fabric_mac.empty() ? mac_from_name(opt.name) : opt.fabric_mac}});
        w.empty("source", {{"bridge", opt.fabric_bridge}});
        w.empty("model", {{"type", "virtio"}});
        w.close();
    }
    w.open("serial", {{"type", "pty"}});
    if (!opt.serial_log.empty()) w.empty("log", {{"file", opt.serial_log}, {"append", "off"}});
    w.open("target", {{"type", "isa-serial"}, {"port", "0"}});
    w.empty("model", {{"name", "isa-serial"}});
    w.close();
    w.close();
    w.open("console", {{"type", "pty"}});
    w.empty("target", {{"type", "serial"}, {"port", "0"}});
    w.close();
    if (opt.guest_agent) {
        w.open("channel", {{"type", "unix"}});
        w.empty("target", {{"type", "virtio"}, {"name", "org.qemu.guest_agent.0"}});
        w.close();
    }
    if (viommu) {
        w.open("iommu", {{"model", "intel"}});
        Attrs drv = {{"intremap", "on"}, {"caching_mode", "on"}, {"iotlb", "on"}};
        if (vcpus > 255) drv.emplace_back("eim", "on");
        w.empty("driver", drv);
        w.close();
    }
    w.empty("memballoon", {{"model", "none"}});
    w.close();  // devices

    if (opt.net == NetBackend::slirp) {
        // libvirt 9 has no port forward for slirp; QEMU's own user netdev
        // gives the guest 10.0.2.2 as the host (guest_contract.h).
        std::string netdev = "user,id=kilnnet0";
        if (opt.smoke_host_port > 0) {
            netdev += ",hostfwd=tcp:127.0.0.1:" + std::to_string(opt.smoke_host_port) +
                      "-:" + std::to_string(kGuestSmokePort);
        }
        if (opt.rdma_host_port > 0) {
            netdev +=
                ",hostfwd=tcp:127.0.0.1:" + std::to_string(opt.rdma_host_port) + "-:" + std::to_string(kGuestRdmaPort);
        }
        w.open("qemu:commandline");
        w.empty("qemu:arg", {{"value", "-netdev"}});
        w.empty("qemu:arg", {{"value", netdev}});
        w.empty("qemu:arg", {{"value", "-device"}});
        // A fixed slot: QEMU would otherwise take the first free one, which
        // libvirt may have given an expander bus. Slots from 1 are libvirt's,
        // 0x1f is the ICH9 LPC, and kiln adds no legacy PCI that would need
        // the DMI bridge libvirt puts at 0x1e.
        w.empty("qemu:arg", {{"value", "virtio-net-pci,netdev=kilnnet0,bus=pcie.0,addr=0x1e"}});
        w.close();
    }
    w.close();  // domain
    return w.str();
}

}  // namespace kiln::vm
