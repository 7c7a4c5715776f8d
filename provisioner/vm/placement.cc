#include "provisioner/vm/placement.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "provisioner/vm/sysfs_reader.h"

namespace kiln::vm {

namespace {

constexpr uint64_t kGiBKiB = uint64_t{1024} * 1024;

std::string page_name(uint64_t page_kib) {
    return page_kib == kHugePage1G ? "1G" : "2M";
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
    std::string out;
    for (const auto& s : v) {
        if (!out.empty()) out += sep;
        out += s;
    }
    return out;
}

Error refuse(const PlacementRequest& req, const std::string& code, const std::vector<std::string>& problems) {
    return make_error("vm", code, std::string(split_name(req.split)) + " split refused: " + join(problems, "; "));
}

// Splits `total` into `parts` near-equal shares, the remainder to the first.
std::vector<uint64_t> shares(uint64_t total, size_t parts) {
    std::vector<uint64_t> out(parts, total / parts);
    for (size_t i = 0; i < total % parts; ++i) ++out[i];
    return out;
}

// Which VMs, each with its cells' host nodes.
Result<std::vector<VmPlacement>> choose_vms(const HostTopology& host, const PlacementRequest& req) {
    std::vector<VmPlacement> vms;
    if (req.split == Split::whole) {
        VmPlacement vm{"whole", {}};
        for (const auto& n : host.nodes) {
            if (!n.cpus.empty()) vm.cells.push_back(VmCell{n.id});
        }
        if (vm.cells.empty()) return refuse(req, "vm.resources", {"no NUMA node has CPUs"});
        vms.push_back(std::move(vm));
        return vms;
    }
    if (req.split == Split::count) {
        if (!host.gpus.empty()) {
            return refuse(req, "vm.gpus",
                          {"the host has " + std::to_string(host.gpus.size()) +
                           " GPUs: split them whole or by numa, count is for hosts without GPUs"});
        }
        const auto first =
            std::find_if(host.nodes.begin(), host.nodes.end(), [](const NumaNode& n) { return !n.cpus.empty(); });
        if (first == host.nodes.end()) return refuse(req, "vm.resources", {"no NUMA node has CPUs"});
        if (req.count < 1) return refuse(req, "vm.resources", {"count must be at least 1"});
        for (int i = 0; i < req.count; ++i) vms.push_back(VmPlacement{"part" + std::to_string(i), {VmCell{first->id}}});
        return vms;
    }
    std::set<int> nodes;
    std::vector<std::string> problems;
    for (const auto& g : host.gpus) {
        const int n = host.node_of(*host.device(g.address));
        if (n < 0) {
            problems.push_back("gpu " + g.address + " has no NUMA node (numa_node -1)");
        } else {
            nodes.insert(n);
        }
    }
    if (!problems.empty()) return refuse(req, "vm.numa", problems);
    if (nodes.empty()) return refuse(req, "vm.numa", {"no NUMA node has GPUs"});
    for (int n : nodes) {
        if (host.node(n)->cpus.empty()) problems.push_back("node " + std::to_string(n) + " has GPUs but no CPUs");
        vms.push_back(VmPlacement{"numa" + std::to_string(n), {VmCell{n}}});
    }
    if (!problems.empty()) return refuse(req, "vm.numa", problems);
    return vms;
}

// The NIC function a VM gets for a PF: its first unused VF, or the PF
// itself when it has no VFs (or every VF is taken). "" when nothing of it is
// left: a function is never given twice.
std::string nic_function(const HostTopology& host, const Nic& nic, std::set<std::string>& used,
                         std::vector<std::string>& notes) {
    for (const auto& vf : nic.vfs) {
        if (used.insert(vf).second) return vf;
    }
    if (!used.insert(nic.address).second) {
        notes.push_back("nic " + nic.address + ": every function is already given to a VM; not passed again");
        return "";
    }
    if (!nic.vfs.empty()) {
        notes.push_back("nic " + nic.address + ": every VF is taken; passing the PF");
    } else if (const PciDevice* pf = host.device(nic.address); pf->sriov_totalvfs.value_or(0) > 0) {
        notes.push_back("nic " + nic.address + " supports SR-IOV but has no VFs (sriov_numvfs 0); passing the PF");
    }
    return nic.address;
}

// The GPUs of one cell grouped as they pair: GPUs that share a NIC through
// a switch (PIX/PXB) land in one slot with all their NICs, so the guest
// sees them under one emulated switch as the host has them. The slot names
// the switch they all share.
struct SlotPlan {
    std::string host_switch;
    std::vector<const Gpu*> gpus;
    std::vector<std::string> nics;  // PFs
};

std::vector<SlotPlan> group_by_pairing(const HostTopology& host, const std::vector<const Gpu*>& gpus) {
    std::vector<SlotPlan> plans;
    std::map<std::string, size_t> slot_of_nic;     // PF -> plans[]
    std::map<std::string, size_t> slot_of_switch;  // GPUs without a switch NIC: by their nearest switch
    for (const Gpu* g : gpus) {
        std::optional<size_t> into;
        if (!g->pairing_switch.empty()) {
            for (const auto& n : g->nics) {
                auto it = slot_of_nic.find(n);
                if (it == slot_of_nic.end() || it->second == into) continue;
                if (!into) {
                    into = it->second;
                    continue;
                }
                // This GPU joins two slots (NICs under two sub-switches it
                // sits above): merge the second into the first.
                const size_t from = it->second;
                SlotPlan& dst = plans[*into];
                SlotPlan& src = plans[from];
                dst.gpus.insert(dst.gpus.end(), src.gpus.begin(), src.gpus.end());
                for (const auto& m : src.nics) {
                    dst.nics.push_back(m);
                    slot_of_nic[m] = *into;
                }
                src.gpus.clear();
                src.nics.clear();
            }
        } else if (auto it = slot_of_switch.find(g->pcie_switch);
                   !g->pcie_switch.empty() && it != slot_of_switch.end()) {
            into = it->second;
        }
        if (!into) {
            into = plans.size();
            plans.push_back(SlotPlan{g->pairing_switch.empty() ? g->pcie_switch : g->pairing_switch, {}, {}});
            if (g->pairing_switch.empty() && !g->pcie_switch.empty()) slot_of_switch[g->pcie_switch] = *into;
        }
        SlotPlan& p = plans[*into];
        p.gpus.push_back(g);
        if (g->pairing_switch.empty()) continue;  // root-port NICs get slots of their own
        for (const auto& n : g->nics) {
            if (slot_of_nic.emplace(n, *into).second) p.nics.push_back(n);
        }
    }
    plans.erase(std::remove_if(plans.begin(), plans.end(), [](const SlotPlan& p) { return p.gpus.empty(); }),
                plans.end());
    // The switch above every member: GPUs sharing a NIC may sit under
    // different switches below it (DGX A100: one per GPU).
    for (auto& p : plans) {
        if (p.nics.empty()) continue;
        const PciDevice& first = *host.device(p.gpus.front()->address);
        int depth = std::numeric_limits<int>::max();
        for (const Gpu* g : p.gpus) {
            if (g != p.gpus.front()) depth = std::min(depth, shared_switch_depth(first, *host.device(g->address)));
        }
        for (const auto& n : p.nics) depth = std::min(depth, shared_switch_depth(first, *host.device(n)));
        p.host_switch = depth < 0 ? "" : first.bridges[static_cast<size_t>(depth)];
    }
    // As before: by host switch, GPUs on root ports last.
    std::stable_sort(plans.begin(), plans.end(), [](const SlotPlan& a, const SlotPlan& b) {
        if (a.host_switch.empty() != b.host_switch.empty()) return b.host_switch.empty();
        return a.host_switch < b.host_switch;
    });
    return plans;
}

void assign_devices(const HostTopology& host, const PlacementRequest& req, std::vector<VmPlacement>& vms,
                    std::vector<std::string>& notes) {
    std::set<std::string> used;
    // Every VM with GPUs gets its nodes' fabric (count VMs have none).
    const bool with_fabric = !host.gpus.empty() && req.split != Split::count;
    for (auto& vm : vms) {
        std::set<std::string> given;  // PFs this VM has a function of
        for (auto& cell : vm.cells) {
            const bool first_cell = &cell == &vm.cells.front();
            std::vector<const Gpu*> gpus;
            for (const auto& g : host.gpus) {
                const int n = host.node_of(*host.device(g.address));
                // whole: a GPU of unknown node goes to the first cell
                if (n == cell.host_node || (n < 0 && first_cell)) gpus.push_back(&g);
            }
            for (auto& plan : group_by_pairing(host, gpus)) {
                SwitchSlot slot{plan.host_switch, {}, {}, {}};
                for (const Gpu* g : plan.gpus) {
                    slot.gpus.push_back(g->address);
                    slot.companions.insert(slot.companions.end(), g->companions.begin(), g->companions.end());
                }
                for (const auto& pf : plan.nics) {
                    const int n = host.node_of(*host.device(pf));
                    if (req.split == Split::numa && n != cell.host_node) {
                        notes.push_back("nic " + pf + " pairs with gpu " + slot.gpus.front() + " but is on node " +
                                        std::to_string(n) + "; left with the host");
                        continue;
                    }
                    given.insert(pf);
                    const std::string f = nic_function(host, *host.nic(pf), used, notes);
                    if (!f.empty()) slot.nics.push_back(f);
                }
                cell.slots.push_back(std::move(slot));
            }
            // The rest of the node's fabric: root-port NICs (NODE) and NICs
            // whose switch holds no GPU, each on a port of its own.
            if (with_fabric) {
                for (const auto& nic : host.nics) {
                    if (!nic.fabric || given.count(nic.address)) continue;
                    const int n = host.node_of(*host.device(nic.address));
                    if (n != cell.host_node && !(n < 0 && first_cell)) continue;
                    const std::string f = nic_function(host, nic, used, notes);
                    if (!f.empty()) cell.slots.push_back(SwitchSlot{"", {}, {f}, {}});
                }
            }
            if (req.split == Split::whole) {
                for (const auto& nv : host.nvswitches) {
                    const int n = host.node_of(*host.device(nv));
                    const bool known = std::any_of(vm.cells.begin(), vm.cells.end(),
                                                   [n](const VmCell& c) { return c.host_node == n; });
                    if (n == cell.host_node || (!known && first_cell)) cell.nvswitches.push_back(nv);
                }
            }
        }
    }
    if (req.split == Split::numa && !host.nvswitches.empty()) {
        notes.push_back(std::to_string(host.nvswitches.size()) +
                        " NVSwitches stay with the host: NVLink across VMs needs NVIDIA's shared NVSwitch mode "
                        "(fabric manager outside the guests)");
    }
}

// With ACS off above them (a BIOS setting, common on HGX boards), a GPU's
// IOMMU group spans its whole top-level switch: its pair's NIC PFs and
// their VFs are in it too. VFIO hands a group to one VM or none, so the
// fabric NIC functions of a passed GPU's group that no VM has go with the
// GPU, into its slot (the PFs whole, and every VF). Anything else (a
// management NIC, a disk) stays where it is, and a group across VMs stays
// refused: check_groups names them.
void absorb_gpu_groups(const HostTopology& host, std::vector<VmPlacement>& vms, std::vector<std::string>& notes) {
    std::set<std::string> owned;
    for (const auto& vm : vms) {
        for (const auto& d : vm.devices()) owned.insert(d);
    }
    for (auto& vm : vms) {
        for (auto& cell : vm.cells) {
            for (auto& slot : cell.slots) {
                const std::vector<std::string> gpus = slot.gpus;
                for (const auto& g : gpus) {
                    const PciDevice* gpu = host.device(g);
                    if (!gpu->iommu_group) continue;
                    const IommuGroup* group = host.group(*gpu->iommu_group);
                    std::vector<std::string> taken;
                    for (const auto& m : group->devices) {
                        const PciDevice* md = host.device(m);
                        if (!md || md->kind != DeviceKind::nic || owned.count(m)) continue;
                        // Fabric NICs only: a management NIC in the group still refuses it.
                        const Nic* nic = host.nic(md->is_vf() ? md->physfn : m);
                        if (!nic || !nic->fabric) continue;
                        slot.nics.push_back(m);
                        owned.insert(m);
                        taken.push_back(m);
                    }
                    if (taken.empty()) continue;
                    std::string list;
                    for (const auto& t : taken) list += (list.empty() ? "" : ", ") + t;
                    notes.push_back("IOMMU group " + std::to_string(group->id) + " holds gpu " + g +
                                    " and NIC functions (ACS off above them): " + list + " go with it to vm " +
                                    vm.name);
                }
            }
        }
    }
}

// Every group of a passed device must go, whole, to that one VM; bridges in
// it stay with the host's pcieport driver, which VFIO accepts.
Status check_groups(const HostTopology& host, const PlacementRequest& req, const std::vector<VmPlacement>& vms) {
    std::map<std::string, std::string> owner;
    for (const auto& vm : vms) {
        for (const auto& d : vm.devices()) owner[d] = vm.name;
    }
    std::vector<std::string> problems;
    std::set<int> checked;
    for (const auto& [addr, vm] : owner) {
        const PciDevice* dev = host.device(addr);
        if (!dev->iommu_group) {
            problems.push_back(dev->label() + " has no IOMMU group (is the IOMMU on: intel_iommu=on or amd_iommu=on?)");
            continue;
        }
        const int id = *dev->iommu_group;
        if (!checked.insert(id).second) continue;
        const IommuGroup* group = host.group(id);
        const std::string where = "IOMMU group " + std::to_string(id);
        for (const auto& m : group->devices) {
            if (m == addr) continue;
            const PciDevice* md = host.device(m);
            if (!md) {
                problems.push_back(where + " holds " + dev->label() + " and " + m +
                                   ", which is not a PCI device kiln can pass through");
                continue;
            }
            // A bridge may share the group; so may a member the same VM
            // holds (a GPU's audio function, a dual-port NIC's other port).
            const auto it = owner.find(m);
            if (md->kind == DeviceKind::bridge || (it != owner.end() && it->second == vm)) continue;
            if (md->kind == DeviceKind::other) {
                problems.push_back(where + " holds " + dev->label() + " and " + md->label() +
                                   ", which is not a GPU, NIC, NVSwitch or bridge");
            } else if (it == owner.end()) {
                problems.push_back(where + " would be split: " + dev->label() + " goes to vm " + vm + ", " +
                                   md->label() + " stays with the host");
            } else {
                problems.push_back(where + " would be split across VMs: " + dev->label() + " to vm " + vm + ", " +
                                   md->label() + " to vm " + it->second);
            }
        }
    }
    if (!problems.empty()) return refuse(req, "vm.iommu_group", problems);
    return ok_status();
}

Status assign_cpus(const HostTopology& host, const PlacementRequest& req, std::vector<VmPlacement>& vms) {
    std::vector<std::string> problems;
    for (auto& vm : vms) {
        size_t available = 0;
        for (const auto& c : vm.cells) available += host.node(c.host_node)->cpus.size();
        const size_t want = req.vcpus == 0 ? available : static_cast<size_t>(req.vcpus);
        if (want > available) {
            problems.push_back("vm " + vm.name + ": vcpus " + std::to_string(want) + " exceeds the " +
                               std::to_string(available) + " CPUs of its NUMA nodes");
            continue;
        }
        if (want < vm.cells.size()) {
            problems.push_back("vm " + vm.name + ": vcpus " + std::to_string(want) + " is fewer than its " +
                               std::to_string(vm.cells.size()) + " NUMA cells");
            continue;
        }
        const auto share = req.vcpus == 0 ? std::vector<uint64_t>{} : shares(want, vm.cells.size());
        for (size_t i = 0; i < vm.cells.size(); ++i) {
            const auto& cpus = host.node(vm.cells[i].host_node)->cpus;
            const size_t n = req.vcpus == 0 ? cpus.size() : share[i];
            if (n > cpus.size()) {
                problems.push_back("vm " + vm.name + ": " + std::to_string(n) + " vcpus on node " +
                                   std::to_string(vm.cells[i].host_node) + ", which has " +
                                   std::to_string(cpus.size()) + " CPUs");
                continue;
            }
            vm.cells[i].cpus.assign(cpus.begin(), cpus.begin() + static_cast<std::ptrdiff_t>(n));
        }
    }
    if (!problems.empty()) return refuse(req, "vm.resources", problems);
    return ok_status();
}

Status assign_memory(const HostTopology& host, const PlacementRequest& req, std::vector<VmPlacement>& vms) {
    std::vector<std::string> problems;
    const std::string pages = page_name(req.hugepage_kib) + " hugepages";
    for (auto& vm : vms) {
        if (req.memory_gib > 0 && static_cast<size_t>(req.memory_gib) < vm.cells.size()) {
            problems.push_back("vm " + vm.name + ": memory_gib " + std::to_string(req.memory_gib) +
                               " is less than 1 GiB for each of its " + std::to_string(vm.cells.size()) +
                               " NUMA cells");
            continue;
        }
        const auto share = req.memory_gib > 0 ? shares(static_cast<uint64_t>(req.memory_gib), vm.cells.size())
                                              : std::vector<uint64_t>{};
        for (size_t i = 0; i < vm.cells.size(); ++i) {
            VmCell& cell = vm.cells[i];
            const NumaNode* node = host.node(cell.host_node);
            const std::string on = "vm " + vm.name + ": node " + std::to_string(node->id);
            if (req.hugepages) {
                const HugePagePool* pool = node->pool(req.hugepage_kib);
                const uint64_t want = req.memory_gib > 0 ? share[i] * kGiBKiB / req.hugepage_kib : pool->free;
                if (want == 0) {
                    problems.push_back(on + " has no free " + pages);
                } else if (want > pool->free) {  // only when memory_gib asked for more
                    problems.push_back(on + " needs " + std::to_string(want) + " " + pages + " for " +
                                       std::to_string(share[i]) + " GiB, " + std::to_string(pool->free) + " free of " +
                                       std::to_string(pool->total));
                }
                cell.hugepages = want;
                cell.memory_kib = want * req.hugepage_kib;
            } else {
                const uint64_t want =
                    req.memory_gib > 0 ? share[i] * kGiBKiB : node->memory_free_kib / kGiBKiB * kGiBKiB;
                if (want == 0 || want > node->memory_free_kib) {
                    problems.push_back(on + " needs " + std::to_string(want / kGiBKiB) + " GiB, " +
                                       std::to_string(node->memory_free_kib / kGiBKiB) + " GiB free");
                }
                cell.memory_kib = want;
            }
        }
    }
    // count: the VMs share one node, so their sum must fit in it too.
    if (req.split == Split::count && problems.empty() && !vms.empty()) {
        const NumaNode* node = host.node(vms.front().cells.front().host_node);
        uint64_t total = 0;
        for (const auto& vm : vms) total += req.hugepages ? vm.cells.front().hugepages : vm.cells.front().memory_kib;
        const uint64_t have = req.hugepages ? node->pool(req.hugepage_kib)->free : node->memory_free_kib;
        if (total > have) {
            const std::string unit = req.hugepages ? " " + pages : " KiB";
            problems.push_back(std::to_string(vms.size()) + " VMs need " + std::to_string(total) + unit + " on node " +
                               std::to_string(node->id) + ", " + std::to_string(have) + " free");
        }
    }
    if (!problems.empty()) return refuse(req, "vm.resources", problems);
    return ok_status();
}

}  // namespace

const char* split_name(Split split) {
    switch (split) {
        case Split::whole:
            return "whole";
        case Split::numa:
            return "numa";
        case Split::count:
            return "count";
    }
    return "whole";
}

Result<PlacementRequest> request_from_shape(const VmShape& shape) {
    PlacementRequest req;
    if (shape.split == "whole") {
        req.split = Split::whole;
    } else if (shape.split == "numa") {
        req.split = Split::numa;
    } else if (shape.split == "count") {
        req.split = Split::count;
        req.count = shape.count;
        if (req.count < 1)
            return make_error("vm", "vm.shape", "vm." + shape.name + ": split \"count\" needs count >= 1");
    } else {
        return make_error("vm", "vm.shape",
                          "vm." + shape.name + ": split \"" + shape.split + "\" is not whole, numa or count");
    }
    if (shape.vcpus < 0 || shape.memory_gib < 0) {
        return make_error("vm", "vm.shape", "vm." + shape.name + ": vcpus and memory_gib must not be negative");
    }
    if (req.split == Split::count && req.count > 1 && shape.memory_gib == 0) {
        // 0 means "all of the node's free memory", which only one VM can have.
        return make_error("vm", "vm.shape",
                          "vm." + shape.name + ": split \"count\" with " + std::to_string(req.count) +
                              " VMs needs memory_gib per VM");
    }
    req.vcpus = shape.vcpus;
    req.memory_gib = shape.memory_gib;
    req.hugepages = shape.hugepages;
    return req;
}

size_t VmPlacement::vcpus() const {
    size_t n = 0;
    for (const auto& c : cells) n += c.cpus.size();
    return n;
}

uint64_t VmPlacement::memory_kib() const {
    uint64_t n = 0;
    for (const auto& c : cells) n += c.memory_kib;
    return n;
}

std::vector<std::string> VmPlacement::gpus() const {
    std::vector<std::string> out;
    for (const auto& c : cells) {
        for (const auto& s : c.slots) out.insert(out.end(), s.gpus.begin(), s.gpus.end());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> VmPlacement::devices() const {
    std::vector<std::string> out;
    for (const auto& c : cells) {
        for (const auto& s : c.slots) {
            out.insert(out.end(), s.gpus.begin(), s.gpus.end());
            out.insert(out.end(), s.nics.begin(), s.nics.end());
            out.insert(out.end(), s.companions.begin(), s.companions.end());
        }
        out.insert(out.end(), c.nvswitches.begin(), c.nvswitches.end());
    }
    std::sort(out.begin(), out.end());
    return out;
}

const VmPlacement* Placement::vm(const std::string& name) const {
    for (const auto& v : vms) {
        if (v.name == name) return &v;
    }
    return nullptr;
}

Result<Placement> place(const HostTopology& host, const PlacementRequest& request) {
    if (request.vcpus < 0 || request.memory_gib < 0) {
        return make_error("vm", "vm.request", "vcpus and memory_gib must not be negative");
    }
    if (request.hugepages && request.hugepage_kib != kHugePage1G && request.hugepage_kib != kHugePage2M) {
        return make_error("vm", "vm.request",
                          "hugepage size " + std::to_string(request.hugepage_kib) + " kB is not 1048576 or 2048");
    }
    Placement out;
    out.request = request;
    auto vms = choose_vms(host, request);
    if (!vms) return vms.error();
    out.vms = std::move(*vms);
    assign_devices(host, request, out.vms, out.notes);
    absorb_gpu_groups(host, out.vms, out.notes);
    if (auto s = check_groups(host, request, out.vms); !s) return s.error();
    if (auto s = assign_cpus(host, request, out.vms); !s) return s.error();
    if (auto s = assign_memory(host, request, out.vms); !s) return s.error();
    return out;
}

nlohmann::json to_json(const Placement& p) {
    using nlohmann::json;
    json vms = json::array();
    for (const auto& vm : p.vms) {
        json cells = json::array();
        for (const auto& c : vm.cells) {
            json slots = json::array();
            for (const auto& s : c.slots) {
                slots.push_back(
                    {{"host_switch", s.host_switch}, {"gpus", s.gpus}, {"nics", s.nics}, {"companions", s.companions}});
            }
            cells.push_back({{"host_node", c.host_node},
                             {"cpus", format_cpulist(c.cpus)},
                             {"vcpus", c.cpus.size()},
                             {"memory_kib", c.memory_kib},
                             {"hugepages", c.hugepages},
                             {"slots", slots},
                             {"nvswitches", c.nvswitches}});
        }
        vms.push_back({{"name", vm.name},
                       {"vcpus", vm.vcpus()},
                       {"memory_kib", vm.memory_kib()},
                       {"devices", vm.devices()},
                       {"cells", cells}});
    }
    return {{"split", split_name(p.request.split)},
            {"hugepages", p.request.hugepages},
            {"hugepage_kib", p.request.hugepages ? json(p.request.hugepage_kib) : json(nullptr)},
            {"vms", vms},
            {"notes", p.notes}};
}

}  // namespace kiln::vm
