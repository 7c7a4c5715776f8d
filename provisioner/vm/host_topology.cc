#include "provisioner/vm/host_topology.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <sstream>

#include <tuple>

#include "provisioner/vm/sysfs_reader.h"

namespace kiln::vm {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNodeDir = "devices/system/node";
constexpr const char* kPciDir = "bus/pci/devices";

std::optional<int> parse_index(std::string_view s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
    return v;
}

// "Node 0 MemTotal:       263856780 kB" -> 263856780
Result<uint64_t> meminfo_field(const SysfsReader& sys, const std::string& rel, const std::string& text,
                               const std::string& key) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream words(line);
        std::string node, id, name, value, unit;
        words >> node >> id >> name >> value >> unit;
        if (name != key + ":") continue;
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v, 10);
        if (value.empty() || ec != std::errc() || p != value.data() + value.size() || unit != "kB") {
            return sys.malformed(rel, "bad " + key + " line \"" + line + "\"");
        }
        return v;
    }
    return sys.malformed(rel, "no " + key + " line");
}

Result<HugePagePool> read_pool(const SysfsReader& sys, const std::string& node_dir, uint64_t page_kib) {
    const std::string dir = node_dir + "/hugepages/hugepages-" + std::to_string(page_kib) + "kB";
    // A kernel built without this page size has no folder: an empty pool.
    if (!sys.exists(dir)) return HugePagePool{};
    HugePagePool pool;
    for (auto [name, out] : {std::pair{"nr_hugepages", &pool.total}, std::pair{"free_hugepages", &pool.free}}) {
        const std::string rel = dir + "/" + name;
        auto v = sys.integer(rel);
        if (!v) return v.error();
        if (*v < 0) return sys.malformed(rel, "negative page count");
        *out = static_cast<uint64_t>(*v);
    }
    if (pool.free > pool.total) return sys.malformed(dir + "/free_hugepages", "more free pages than nr_hugepages");
    return pool;
}

Result<std::vector<NumaNode>> read_nodes(const SysfsReader& sys) {
    auto names = sys.list(kNodeDir);
    if (!names) return names.error();
    std::vector<NumaNode> nodes;
    for (const auto& name : *names) {
        if (name.rfind("node", 0) != 0) continue;
        auto id = parse_index(std::string_view(name).substr(4));
        if (!id) continue;  // "node" files such as has_cpu are not node folders
        const std::string dir = std::string(kNodeDir) + "/" + name;
        NumaNode n;
        n.id = *id;
        auto cpulist = sys.text(dir + "/cpulist");
        if (!cpulist) return cpulist.error();
        auto cpus = parse_cpulist(*cpulist);
        if (!cpus) return sys.malformed(dir + "/cpulist", "bad cpu list \"" + *cpulist + "\"");
        n.cpus = std::move(*cpus);
        auto meminfo = sys.text(dir + "/meminfo");
        if (!meminfo) return meminfo.error();
        auto total = meminfo_field(sys, dir + "/meminfo", *meminfo, "MemTotal");
        if (!total) return total.error();
        auto free = meminfo_field(sys, dir + "/meminfo", *meminfo, "MemFree");
        if (!free) return free.error();
        n.memory_total_kib = *total;
        n.memory_free_kib = *free;
        auto g1 = read_pool(sys, dir, kHugePage1G);
        if (!g1) return g1.error();
        auto m2 = read_pool(sys, dir, kHugePage2M);
        if (!m2) return m2.error();
        n.huge_1g = *g1;
        n.huge_2m = *m2;
        nodes.push_back(std::move(n));
    }
    if (nodes.empty()) return sys.malformed(kNodeDir, "no nodeN folders");
    std::sort(nodes.begin(), nodes.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
    return nodes;
}

// Where the device really sits: the bridges above it, from its canonical
// path under devices/. A "pciDDDD:BB" component starts a hierarchy (a host
// bridge, or a VMD domain nested below an endpoint), so it resets the chain.
Status read_position(const SysfsReader& sys, const fs::path& devices_root, const std::string& rel, PciDevice& dev) {
    auto real = sys.resolve(rel);
    if (!real) return real.error();
    const fs::path under = real->lexically_relative(devices_root);
    if (under.empty() || *under.begin() == "..") {
        return sys.malformed(rel, "resolves to " + real->string() + ", outside devices/");
    }
    std::vector<std::string> chain;
    for (const auto& part : under) {
        const std::string s = part.string();
        if (s.rfind("pci", 0) == 0) {
            dev.host_bridge = s;
            chain.clear();
        } else if (is_pci_address(s)) {
            chain.push_back(s);
        }
    }
    if (chain.empty() || chain.back() != dev.address) {
        return sys.malformed(rel, "resolves to " + real->string() + ", not a folder named " + dev.address);
    }
    chain.pop_back();
    dev.bridges = std::move(chain);
    return ok_status();
}

Result<PciDevice> read_device(const SysfsReader& sys, const fs::path& devices_root, const std::string& address) {
    const std::string rel = std::string(kPciDir) + "/" + address;
    PciDevice dev;
    dev.address = address;
    auto vendor = sys.hex(rel + "/vendor", 0xffff);
    if (!vendor) return vendor.error();
    auto device = sys.hex(rel + "/device", 0xffff);
    if (!device) return device.error();
    auto cls = sys.hex(rel + "/class", 0xffffff);
    if (!cls) return cls.error();
    dev.vendor = static_cast<uint16_t>(*vendor);
    dev.device = static_cast<uint16_t>(*device);
    dev.class_code = static_cast<uint32_t>(*cls);
    dev.kind = classify(dev.vendor, dev.class_code);

    auto numa = sys.integer(rel + "/numa_node");
    if (!numa) return numa.error();
    if (*numa < -1 || *numa > 4095) return sys.malformed(rel + "/numa_node", "node out of range");
    dev.numa_node = static_cast<int>(*numa);

    auto group = sys.link_name(rel + "/iommu_group");
    if (!group) return group.error();
    if (group->has_value()) {
        auto id = parse_index(**group);
        if (!id) return sys.malformed(rel + "/iommu_group", "link to \"" + **group + "\", not a group number");
        dev.iommu_group = *id;
    }
    auto driver = sys.link_name(rel + "/driver");
    if (!driver) return driver.error();
    dev.driver = driver->value_or("");

    if (auto s = read_position(sys, devices_root, rel, dev); !s) return s.error();

    for (auto [name, out] :
         {std::pair{"/sriov_totalvfs", &dev.sriov_totalvfs}, std::pair{"/sriov_numvfs", &dev.sriov_numvfs}}) {
        auto v = sys.optional_integer(rel + name);
        if (!v) return v.error();
        if (v->has_value() && (**v < 0 || **v > 65535)) return sys.malformed(rel + name, "VF count out of range");
        if (v->has_value()) *out = static_cast<int>(**v);
    }
    auto physfn = sys.link_name(rel + "/physfn");
    if (!physfn) return physfn.error();
    if (physfn->has_value()) {
        if (!is_pci_address(**physfn)) return sys.malformed(rel + "/physfn", "link to \"" + **physfn + "\"");
        dev.physfn = **physfn;
    }
    auto entries = sys.list(rel);
    if (!entries) return entries.error();
    std::vector<std::pair<int, std::string>> vfs;
    for (const auto& e : *entries) {
        if (e.rfind("virtfn", 0) != 0) continue;
        auto n = parse_index(std::string_view(e).substr(6));
        if (!n) continue;
        auto vf = sys.link_name(rel + "/" + e);
        if (!vf) return vf.error();
        if (!vf->has_value() || !is_pci_address(**vf)) return sys.malformed(rel + "/" + e, "not a link to a VF");
        vfs.emplace_back(*n, **vf);
    }
    std::sort(vfs.begin(), vfs.end());
    for (auto& [n, vf] : vfs) dev.virtfns.push_back(std::move(vf));

    auto rdma = sys.list(rel + "/infiniband", /*optional=*/true);
    if (!rdma) return rdma.error();
    for (const auto& name : *rdma) {
        auto guid = sys.optional_text(rel + "/infiniband/" + name + "/node_guid");
        if (!guid) return guid.error();
        dev.rdma_devices.push_back(name);
        dev.rdma_guids.push_back(guid->value_or(""));
    }
    auto acs = sys.optional_hex(rel + "/acs_ctrl", 0xffff);
    if (!acs) return acs.error();
    if (acs->has_value()) dev.acs_ctrl = static_cast<uint16_t>(**acs);
    // Config space: ACS, ATS and the link's capability as the device
    // itself reports them (all of it only when read as root).
    auto config = sys.optional_bytes(rel + "/config");
    if (!config) return config.error();
    if (config->has_value()) {
        dev.config = parse_pci_config(**config);
        if (dev.config->acs_ctrl) dev.acs_ctrl = dev.config->acs_ctrl;
    }
    // Link speed and width feed the guest's NCCL topology file; some
    // bridges have none, and a VF's read "Unknown" and 0.
    for (auto [which, speed_out, width_out] : {std::tuple{"current", &dev.link_speed, &dev.link_width},
                                               std::tuple{"max", &dev.max_link_speed, &dev.max_link_width}}) {
        const std::string base = rel + "/" + which + "_link_";
        auto speed = sys.optional_text(base + "speed");
        if (!speed) return speed.error();
        if (speed->has_value() && **speed != "Unknown") *speed_out = **speed;
        auto width = sys.optional_integer(base + "width");
        if (!width) return width.error();
        if (width->has_value()) {
            if (**width < 0 || **width > 32) return sys.malformed(base + "width", "not a link width (0-32)");
            if (**width > 0) *width_out = static_cast<int>(**width);
        }
    }
    return dev;
}

// "cpu family : 23" and "model : 49" fold CPUID's extended fields in;
// NCCL writes the family as base + (extended << 4), so AMD's 23 (0xf + 8)
// is familyid 143 and Intel's 6 stays 6. The model is the same both ways.
CpuId parse_cpuinfo(const std::string& text) {
    CpuId id;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty()) break;  // the first processor's block is enough
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        auto number = [&]() { return parse_index(value).value_or(-1); };
        if (key == "vendor_id") {
            id.vendor = value;
        } else if (key == "cpu family") {
            const int f = number();
            id.familyid = f < 0xf ? f : 0xf + ((f - 0xf) << 4);
        } else if (key == "model") {
            id.modelid = number();
        }
    }
    return id;
}

// The CPU's identity; a host or tree without cpuinfo leaves it unknown.
Result<CpuId> read_cpu(const DiscoverOptions& options) {
    std::string path = options.cpuinfo;
    if (path.empty()) {
        const fs::path recorded = fs::path(options.sysfs_root) / "cpuinfo";
        if (fs::exists(recorded)) {
            path = recorded.string();
        } else if (fs::path(options.sysfs_root).lexically_normal() == "/sys") {
            path = "/proc/cpuinfo";
        } else {
            return CpuId{};
        }
    }
    const SysfsReader file(fs::path(path).parent_path());
    auto text = file.optional_text(fs::path(path).filename().string());
    if (!text) return text.error();
    return text->has_value() ? parse_cpuinfo(**text) : CpuId{};
}

Status check_links(const SysfsReader& sys, const HostTopology& host) {
    for (const auto& d : host.devices) {
        const std::string rel = std::string(kPciDir) + "/" + d.address;
        for (const auto& b : d.bridges) {
            if (!host.device(b)) return sys.malformed(rel, "parent " + b + " is not under " + kPciDir);
        }
        if (d.numa_node >= 0 && !host.node(d.numa_node)) {
            return sys.malformed(rel + "/numa_node",
                                 "node " + std::to_string(d.numa_node) + " is not under " + kNodeDir);
        }
        if (!d.physfn.empty()) {
            const PciDevice* pf = host.device(d.physfn);
            if (!pf) return sys.malformed(rel + "/physfn", "PF " + d.physfn + " is not under " + kPciDir);
            if (std::find(pf->virtfns.begin(), pf->virtfns.end(), d.address) == pf->virtfns.end()) {
                return sys.malformed(rel + "/physfn", "PF " + d.physfn + " has no virtfn link back");
            }
        }
        for (const auto& vf : d.virtfns) {
            const PciDevice* v = host.device(vf);
            if (!v || v->physfn != d.address) {
                return sys.malformed(rel, "virtfn " + vf + " is missing or has no physfn link back");
            }
        }
    }
    return ok_status();
}

Result<std::vector<IommuGroup>> read_groups(const SysfsReader& sys, const HostTopology& host) {
    std::set<int> ids;
    for (const auto& d : host.devices) {
        if (d.iommu_group) ids.insert(*d.iommu_group);
    }
    std::vector<IommuGroup> groups;
    for (int id : ids) {
        const std::string rel = "kernel/iommu_groups/" + std::to_string(id) + "/devices";
        auto members = sys.list(rel);
        if (!members) return members.error();
        IommuGroup g{id, *members};
        for (const auto& m : g.devices) {
            // Non-PCI members (platform devices) stay in the list: placement
            // refuses them like any other device it cannot pass through.
            const PciDevice* d = host.device(m);
            if (d && d->iommu_group != id) return sys.malformed(rel + "/" + m, "device's iommu_group is another group");
        }
        groups.push_back(std::move(g));
    }
    for (const auto& d : host.devices) {
        if (!d.iommu_group) continue;
        const IommuGroup* g = nullptr;
        for (const auto& gg : groups) {
            if (gg.id == *d.iommu_group) g = &gg;
        }
        if (std::find(g->devices.begin(), g->devices.end(), d.address) == g->devices.end()) {
            return sys.malformed("kernel/iommu_groups/" + std::to_string(g->id) + "/devices",
                                 "does not list " + d.address);
        }
    }
    return groups;
}

// Pairs a GPU as nvidia-smi would choose its NICs: the fabric NICs under the
// deepest switch it shares with any (all of them: a dual-port card is two
// PFs, an 8-NIC board gives a GPU two NICs), else the fabric NICs on root
// ports of its NUMA node. A NIC under another switch of the node is that
// switch's GPUs' NIC, not this one's.
void pair_gpu(const HostTopology& host, const PciDevice& gpu, Gpu& g) {
    int best = -1;
    for (const auto& n : host.nics) {
        if (n.fabric) best = std::max(best, shared_switch_depth(gpu, *host.device(n.address)));
    }
    for (const auto& n : host.nics) {
        if (!n.fabric) continue;
        const PciDevice& nic = *host.device(n.address);
        const bool take =
            best >= 0 ? shared_switch_depth(gpu, nic) == best
                      : n.pcie_switch.empty() && host.node_of(gpu) >= 0 && host.node_of(gpu) == host.node_of(nic);
        if (!take) continue;
        g.nics.push_back(n.address);
        g.nic_relations.push_back(pci_relation(host, gpu, nic));
    }
    if (best >= 0) g.pairing_switch = gpu.bridges[static_cast<size_t>(best)];
}

// Functions of the GPU's own device (same bus and slot) in its IOMMU group
// that are neither GPUs, NICs nor bridges: audio, USB, UCSI.
std::vector<std::string> companions(const HostTopology& host, const PciDevice& gpu) {
    std::vector<std::string> out;
    if (!gpu.iommu_group) return out;
    const std::string slot = gpu.address.substr(0, gpu.address.size() - 1);  // "0000:61:00."
    for (const auto& m : host.group(*gpu.iommu_group)->devices) {
        const PciDevice* d = host.device(m);
        if (d && m != gpu.address && m.rfind(slot, 0) == 0 && d->kind == DeviceKind::other) out.push_back(m);
    }
    return out;
}

// Switches from the bridge chains, then GPUs, NICs and their pairing.
void derive(HostTopology& host) {
    std::map<std::string, PcieSwitch> switches;
    for (const auto& d : host.devices) {
        if (d.kind != DeviceKind::bridge || d.bridges.empty()) continue;
        if (d.bridges.size() % 2 == 1) {  // parent is a root port or a downstream port
            PcieSwitch& s = switches[d.address];
            s.upstream = d.address;
            s.parent = d.bridges.back();
            s.numa_node = host.node_of(d);
        }
    }
    for (const auto& d : host.devices) {
        if (d.kind == DeviceKind::bridge && !d.bridges.empty() && d.bridges.size() % 2 == 0) {
            if (auto it = switches.find(d.bridges.back()); it != switches.end()) {
                it->second.downstream.push_back(d.address);
            }
        }
        const bool nic_pf = d.kind == DeviceKind::nic && !d.is_vf();
        if (d.kind != DeviceKind::gpu && !nic_pf) continue;
        for (size_t i = 1; i < d.bridges.size(); i += 2) {
            auto it = switches.find(d.bridges[i]);
            if (it == switches.end()) continue;
            (d.kind == DeviceKind::gpu ? it->second.gpus : it->second.nics).push_back(d.address);
        }
    }
    for (auto& [addr, s] : switches) host.switches.push_back(std::move(s));

    for (const auto& d : host.devices) {
        if (d.kind == DeviceKind::nic && !d.is_vf()) {
            host.nics.push_back(Nic{d.address, !d.rdma_devices.empty(), nearest_switch(d), d.virtfns, {}});
        } else if (d.kind == DeviceKind::nvswitch) {
            host.nvswitches.push_back(d.address);
        }
    }
    for (const auto& d : host.devices) {
        if (d.kind != DeviceKind::gpu) continue;
        Gpu g{d.address, nearest_switch(d), "", {}, {}, companions(host, d)};
        pair_gpu(host, d, g);
        host.gpus.push_back(std::move(g));
    }
    for (auto& n : host.nics) {
        for (const auto& g : host.gpus) {
            if (std::find(g.nics.begin(), g.nics.end(), n.address) != g.nics.end()) n.gpus.push_back(g.address);
        }
    }
}

template <class T, class K, class F>
const T* find_in(const std::vector<T>& v, const K& key, F field) {
    for (const auto& x : v) {
        if (field(x) == key) return &x;
    }
    return nullptr;
}

}  // namespace

const HugePagePool* NumaNode::pool(uint64_t page_kib) const {
    if (page_kib == kHugePage1G) return &huge_1g;
    if (page_kib == kHugePage2M) return &huge_2m;
    return nullptr;
}

const PciDevice* HostTopology::device(const std::string& address) const {
    auto it = index.find(address);
    return it == index.end() ? nullptr : &devices[it->second];
}
const NumaNode* HostTopology::node(int id) const {
    return find_in(nodes, id, [](const NumaNode& n) { return n.id; });
}
const IommuGroup* HostTopology::group(int id) const {
    return find_in(groups, id, [](const IommuGroup& g) { return g.id; });
}
const PcieSwitch* HostTopology::pcie_switch(const std::string& upstream) const {
    if (upstream.empty()) return nullptr;
    return find_in(switches, upstream, [](const PcieSwitch& s) { return s.upstream; });
}
const Gpu* HostTopology::gpu(const std::string& address) const {
    return find_in(gpus, address, [](const Gpu& g) { return g.address; });
}
const Nic* HostTopology::nic(const std::string& address) const {
    return find_in(nics, address, [](const Nic& n) { return n.address; });
}

int HostTopology::node_of(const PciDevice& dev) const {
    if (dev.numa_node >= 0) return dev.numa_node;
    return nodes.size() == 1 ? nodes.front().id : -1;
}

size_t HostTopology::cpu_count() const {
    size_t n = 0;
    for (const auto& node : nodes) n += node.cpus.size();
    return n;
}

size_t HostTopology::vf_count() const {
    return static_cast<size_t>(
        std::count_if(devices.begin(), devices.end(), [](const PciDevice& d) { return d.is_vf(); }));
}

void HostTopology::reindex() {
    index.clear();
    for (size_t i = 0; i < devices.size(); ++i) index[devices[i].address] = i;
}

std::string nearest_switch(const PciDevice& dev) {
    if (dev.bridges.size() < 2) return "";
    size_t i = dev.bridges.size() - 1;
    if (i % 2 == 0) --i;  // step back from a downstream port (or root port) to its upstream port
    return dev.bridges[i];
}

Result<HostTopology> discover_host(const DiscoverOptions& options) {
    const SysfsReader sys(options.sysfs_root);
    HostTopology host;
    host.root = options.sysfs_root;

    auto nodes = read_nodes(sys);
    if (!nodes) return nodes.error();
    host.nodes = std::move(*nodes);

    auto devices_root = sys.resolve("devices");
    if (!devices_root) return devices_root.error();
    auto addresses = sys.list(kPciDir);
    if (!addresses) return addresses.error();
    for (const auto& a : *addresses) {
        if (!is_pci_address(a)) return sys.malformed(std::string(kPciDir) + "/" + a, "not a PCI address");
        auto dev = read_device(sys, *devices_root, a);
        if (!dev) return dev.error();
        host.devices.push_back(std::move(*dev));
    }
    host.reindex();
    if (auto s = check_links(sys, host); !s) return s.error();
    auto groups = read_groups(sys, host);
    if (!groups) return groups.error();
    host.groups = std::move(*groups);
    derive(host);
    auto cpu = read_cpu(options);
    if (!cpu) return cpu.error();
    host.cpu = std::move(*cpu);
    return host;
}

}  // namespace kiln::vm
