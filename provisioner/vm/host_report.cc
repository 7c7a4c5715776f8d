#include "provisioner/vm/host_report.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "provisioner/vm/gdr_path.h"
#include "provisioner/vm/pci_relation.h"
#include "provisioner/vm/sysfs_reader.h"

namespace kiln::vm {

using nlohmann::json;

namespace {

std::string hex(unsigned value, int width) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*x", width, value);
    return buf;
}

std::string gib(uint64_t kib) {
    char buf[32];
    const double g = static_cast<double>(kib) / (1024.0 * 1024.0);
    if (kib % (uint64_t{1024} * 1024) == 0) {
        std::snprintf(buf, sizeof buf, "%.0f GiB", g);
    } else {
        std::snprintf(buf, sizeof buf, "%.1f GiB", g);
    }
    return buf;
}

json opt(const std::optional<int>& v) {
    return v ? json(*v) : json(nullptr);
}

json pool_json(const HugePagePool& p) {
    return {{"total", p.total}, {"free", p.free}};
}

std::string group_text(const PciDevice& d) {
    return d.iommu_group ? "group " + std::to_string(*d.iommu_group) : "no iommu group";
}

std::string join(const std::vector<std::string>& v, const char* sep = " ") {
    std::string out;
    for (const auto& s : v) {
        if (!out.empty()) out += sep;
        out += s;
    }
    return out;
}

// One line for a GPU, NIC or NVSwitch in describe().
std::string device_line(const HostTopology& host, const PciDevice& d) {
    std::string line = std::string(kind_name(d.kind)) + " " + d.address + " " + d.id() + " " + group_text(d);
    if (!d.driver.empty()) line += " driver " + d.driver;
    if (d.kind == DeviceKind::gpu) {
        const Gpu* g = host.gpu(d.address);
        std::vector<std::string> pairs;
        for (size_t i = 0; g && i < g->nics.size(); ++i) {
            pairs.push_back(g->nics[i] + " (" + relation_name(g->nic_relations[i]) + ")");
        }
        line += pairs.empty() ? ", no paired NIC" : ", pairs with " + join(pairs);
        if (g && !g->companions.empty()) line += ", with " + join(g->companions);
    } else if (d.kind == DeviceKind::nic) {
        if (d.is_infiniband()) line += " infiniband";
        if (!d.rdma_devices.empty()) line += " rdma " + join(d.rdma_devices);
        if (d.sriov_totalvfs) {
            line += ", vfs " + std::to_string(d.sriov_numvfs.value_or(0)) + "/" + std::to_string(*d.sriov_totalvfs);
        }
        for (const auto& vf : d.virtfns) {
            const PciDevice* v = host.device(vf);
            line += " " + vf + (v ? " (" + group_text(*v) + ")" : "");
        }
    }
    return line;
}

// How nvidia-smi names a NIC: its RDMA device; the address without one.
std::string nic_name(const PciDevice& d) {
    return d.rdma_devices.empty() ? d.address : d.rdma_devices.front();
}

bool listed(const PciDevice& d) {
    return d.kind == DeviceKind::gpu || d.kind == DeviceKind::nvswitch || (d.kind == DeviceKind::nic && !d.is_vf());
}

}  // namespace

json to_json(const PciDevice& d) {
    json j = {
        {"address", d.address},
        {"vendor", hex(d.vendor, 4)},
        {"device", hex(d.device, 4)},
        {"class", hex(d.class_code, 6)},
        {"kind", kind_name(d.kind)},
        {"numa_node", d.numa_node},
        {"iommu_group", opt(d.iommu_group)},
        {"driver", d.driver},
        {"host_bridge", d.host_bridge},
        {"bridges", d.bridges},
    };
    if (d.sriov_totalvfs || d.sriov_numvfs) {
        j["sriov"] = {{"totalvfs", opt(d.sriov_totalvfs)}, {"numvfs", opt(d.sriov_numvfs)}};
    }
    if (!d.physfn.empty()) j["physfn"] = d.physfn;
    if (!d.virtfns.empty()) j["virtfns"] = d.virtfns;
    if (!d.rdma_devices.empty()) {
        json rdma = json::array();
        for (size_t i = 0; i < d.rdma_devices.size(); ++i) {
            rdma.push_back({{"name", d.rdma_devices[i]}, {"node_guid", d.rdma_guids[i]}});
        }
        j["rdma"] = rdma;
    }
    if (d.acs_ctrl) j["acs_ctrl"] = hex(*d.acs_ctrl, 4);
    if (!d.link_speed.empty()) j["link_speed"] = d.link_speed;
    if (d.link_width) j["link_width"] = *d.link_width;
    if (d.config) {
        json c = {{"readable_bytes", d.config->readable}, {"extended", d.config->extended}};
        auto link = [](const std::optional<PciLink>& l) {
            return l ? json{{"speed", pcie_speed_name(l->speed)}, {"width", l->width}} : json(nullptr);
        };
        c["link_cap"] = link(d.config->link_cap);
        c["link_status"] = link(d.config->link_status);
        c["acs_ctrl"] = d.config->acs_ctrl ? json(hex(*d.config->acs_ctrl, 4)) : json(nullptr);
        c["ats_enabled"] = d.config->ats_enabled ? json(*d.config->ats_enabled) : json(nullptr);
        j["config"] = c;
    }
    if (!d.max_link_speed.empty()) j["max_link_speed"] = d.max_link_speed;
    if (d.max_link_width) j["max_link_width"] = *d.max_link_width;
    return j;
}

json to_json(const HostTopology& host) {
    json nodes = json::array();
    for (const auto& n : host.nodes) {
        nodes.push_back({
            {"id", n.id},
            {"cpus", format_cpulist(n.cpus)},
            {"cpu_count", n.cpus.size()},
            {"memory_total_kib", n.memory_total_kib},
            {"memory_free_kib", n.memory_free_kib},
            {"hugepages", {{"1048576kB", pool_json(n.huge_1g)}, {"2048kB", pool_json(n.huge_2m)}}},
        });
    }
    json gpus = json::array();
    for (const auto& g : host.gpus) {
        const PciDevice* d = host.device(g.address);
        json relations = json::array();
        for (const auto& n : host.nics) {
            if (!n.fabric) continue;
            const PciDevice* nd = host.device(n.address);
            relations.push_back({{"nic", n.address},
                                 {"name", nic_name(*nd)},
                                 {"relation", relation_name(pci_relation(host, *d, *nd))}});
        }
        json paired = json::array();
        for (size_t i = 0; i < g.nics.size(); ++i) {
            paired.push_back({{"nic", g.nics[i]}, {"relation", relation_name(g.nic_relations[i])}});
        }
        gpus.push_back({{"address", g.address},
                        {"device", hex(d->device, 4)},
                        {"numa_node", host.node_of(*d)},
                        {"iommu_group", opt(d->iommu_group)},
                        {"pcie_switch", g.pcie_switch},
                        {"pairing_switch", g.pairing_switch},
                        {"nics", g.nics},
                        {"pairs", paired},
                        {"companions", g.companions},
                        {"relations", relations}});
    }
    json nics = json::array();
    for (const auto& n : host.nics) {
        const PciDevice* d = host.device(n.address);
        json vfs = json::array();
        for (const auto& vf : n.vfs) {
            const PciDevice* v = host.device(vf);
            vfs.push_back({{"address", vf}, {"iommu_group", v ? opt(v->iommu_group) : json(nullptr)}});
        }
        nics.push_back({{"address", n.address},
                        {"fabric", n.fabric},
                        {"vendor", hex(d->vendor, 4)},
                        {"device", hex(d->device, 4)},
                        {"link", d->is_infiniband() ? "infiniband" : "ethernet"},
                        {"numa_node", host.node_of(*d)},
                        {"iommu_group", opt(d->iommu_group)},
                        {"pcie_switch", n.pcie_switch},
                        {"rdma_devices", d->rdma_devices},
                        {"vfs", vfs},
                        {"gpus", n.gpus}});
    }
    json switches = json::array();
    for (const auto& s : host.switches) {
        switches.push_back({{"upstream", s.upstream},
                            {"parent", s.parent},
                            {"downstream", s.downstream},
                            {"numa_node", s.numa_node},
                            {"gpus", s.gpus},
                            {"nics", s.nics}});
    }
    json gdr = json::array();
    for (const auto& path : gdr_paths(host)) {
        gdr.push_back({{"gpu", path.gpu},
                       {"nic", path.nic},
                       {"relation", relation_name(path.relation)},
                       {"ports", path.ports},
                       {"ready", gdr_ready_name(path.ready)},
                       {"reasons", path.reasons}});
    }
    json groups = json::array();
    for (const auto& g : host.groups) groups.push_back({{"id", g.id}, {"devices", g.devices}});
    json devices = json::array();
    for (const auto& d : host.devices) devices.push_back(to_json(d));
    json cpu = {{"vendor", host.cpu.vendor},
                {"familyid", host.cpu.familyid >= 0 ? json(host.cpu.familyid) : json(nullptr)},
                {"modelid", host.cpu.modelid >= 0 ? json(host.cpu.modelid) : json(nullptr)}};
    return {
        {"sysfs_root", host.root},
        {"cpu", cpu},
        {"numa_nodes", nodes},
        {"gpus", gpus},
        {"nics", nics},
        {"nvswitches", host.nvswitches},
        {"pcie_switches", switches},
        {"gdr_paths", gdr},
        {"iommu_groups", groups},
        {"pci_devices", devices},
    };
}

std::string describe(const HostTopology& host) {
    std::string out = "host " + host.root + ": " + std::to_string(host.nodes.size()) + " NUMA nodes, " +
                      std::to_string(host.cpu_count()) + " CPUs, " + std::to_string(host.gpus.size()) + " GPUs, " +
                      std::to_string(host.nics.size()) + " NICs (" + std::to_string(host.vf_count()) + " VFs), " +
                      std::to_string(host.nvswitches.size()) + " NVSwitches, " + std::to_string(host.switches.size()) +
                      " PCIe switches, " + std::to_string(host.groups.size()) + " IOMMU groups\n";
    std::set<std::string> shown;
    auto print_under = [&](const std::vector<std::string>& addrs, const std::string& indent) {
        for (const auto& a : addrs) {
            const PciDevice* d = host.device(a);
            if (!d || !listed(*d) || !shown.insert(a).second) continue;
            out += indent + device_line(host, *d) + "\n";
        }
    };
    auto devices_under = [&](const PcieSwitch& s) {
        std::vector<std::string> v;
        for (const auto& d : host.devices) {
            if (nearest_switch(d) == s.upstream) v.push_back(d.address);
        }
        return v;
    };
    for (const auto& n : host.nodes) {
        out += "node " + std::to_string(n.id) + ": cpus " + format_cpulist(n.cpus) + " (" +
               std::to_string(n.cpus.size()) + "), memory " + gib(n.memory_total_kib) + " (" + gib(n.memory_free_kib) +
               " free), hugepages 1G " + std::to_string(n.huge_1g.free) + " free of " +
               std::to_string(n.huge_1g.total) + ", 2M " + std::to_string(n.huge_2m.free) + " free of " +
               std::to_string(n.huge_2m.total) + "\n";
        for (const auto& s : host.switches) {
            if (s.numa_node != n.id) continue;
            std::string acs;
            for (const auto& p : s.downstream) {
                const PciDevice* d = host.device(p);
                if (d && d->acs_ctrl) acs = ", acs_ctrl " + hex(*d->acs_ctrl, 4);
            }
            out += "  switch " + s.upstream + " under " + s.parent + acs + "\n";
            print_under(devices_under(s), "    ");
        }
        std::vector<std::string> rest;
        for (const auto& d : host.devices) {
            if (host.node_of(d) == n.id) rest.push_back(d.address);
        }
        print_under(rest, "  ");
    }
    std::vector<std::string> unknown;
    for (const auto& d : host.devices) unknown.push_back(d.address);
    const size_t before = shown.size();
    std::string tail;
    std::swap(out, tail);
    print_under(unknown, "  ");
    std::swap(out, tail);
    if (shown.size() > before) out += "node unknown:\n" + tail;
    // The GPU-NIC matrix in nvidia-smi topo -m's words, fabric NICs only.
    std::vector<const Nic*> fabric;
    for (const auto& n : host.nics) {
        if (n.fabric) fabric.push_back(&n);
    }
    if (!host.gpus.empty() && !fabric.empty()) {
        out += "gpu-nic relations (nvidia-smi topo -m):\n";
        for (const auto& g : host.gpus) {
            const PciDevice* gd = host.device(g.address);
            std::string row = "  " + g.address + ":";
            for (const Nic* n : fabric) {
                const PciDevice* nd = host.device(n->address);
                row += " " + nic_name(*nd) + " " + relation_name(pci_relation(host, *gd, *nd));
            }
            out += row + "\n";
        }
    }
    // GPUDirect readiness of every pair (gdr_path.h).
    for (const auto& path : gdr_paths(host)) {
        out += "gdr " + path.gpu + " <-> " + path.nic + " (" + relation_name(path.relation) + "): " + describe(path) +
               "\n";
    }
    // What placement will refuse, said up front.
    for (const auto& g : host.groups) {
        std::vector<std::string> passable, others;
        for (const auto& a : g.devices) {
            const PciDevice* d = host.device(a);
            if (d && listed(*d)) passable.push_back(a);
            if (!d || d->kind == DeviceKind::other) {
                // A GPU's own audio/USB function goes with it: not a blocker.
                const bool companion = std::any_of(host.gpus.begin(), host.gpus.end(), [&](const Gpu& gpu) {
                    return std::find(gpu.companions.begin(), gpu.companions.end(), a) != gpu.companions.end();
                });
                if (!companion) others.push_back(d ? d->label() : a);
            }
        }
        if (!passable.empty() && !others.empty()) {
            out += "warning: IOMMU group " + std::to_string(g.id) + " holds " + join(passable) + " and " +
                   join(others, ", ") + ": none of them can be passed through\n";
        }
    }
    return out;
}

}  // namespace kiln::vm
