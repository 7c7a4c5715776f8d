#include "provisioner/vm/node_vms.h"

#include <algorithm>

#include <fmt/format.h>

#include "provisioner/core/sha256.h"
#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/guest_pci_layout.h"
#include "provisioner/vm/nccl_topo.h"
#include "provisioner/vm/overlay_disk.h"

namespace kiln::vm {

namespace {

Error at(const config::SourcePos& pos, const std::string& key, const Error& e) {
    Error out = e;
    out.message = pos.str() + ": " + key + ": " + e.message;
    return out;
}

}  // namespace

Result<Accelerator> parse_accelerator(const std::string& s) {
    if (s == "kvm") return Accelerator::kvm;
    if (s == "tcg") return Accelerator::tcg;
    return make_error("vm", "vm.accelerator", "accelerator \"" + s + "\" is not kvm or tcg");
}

NetBackend parse_net_backend(const std::string& s) {
    if (s == "passt") return NetBackend::passt;
    if (s == "none") return NetBackend::none;
    return NetBackend::slirp;
}

std::string node_vm_dir(const config::Fleet& fleet, const config::Node& node) {
    std::string base;
    if (const VmShape* shape = vm_shape(fleet, node); shape && !shape->images_dir.empty()) {
        base = shape->images_dir;
    } else {
        base = (fleet.dir.empty() ? std::string(".") : fleet.dir) + "/.kiln/vm";
    }
    return base + "/" + node.name;
}

Result<HostTopology> NodeVmPlanner::host(const std::string& sysfs_root) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = hosts_.find(sysfs_root); it != hosts_.end()) return it->second;
    auto h = discover_host({.sysfs_root = sysfs_root});
    if (!h) return h.error();
    hosts_[sysfs_root] = *h;
    return std::move(h).value();
}

Result<Placement> NodeVmPlanner::place_node(const config::Fleet& fleet, const config::Node& node,
                                            const HostTopology& host) {
    const VmShape& shape = *vm_shape(fleet, node);  // plan() checked it
    auto req = request_from_shape(shape);
    if (!req) return at(shape.pos, "vm." + shape.name, req.error());
    req->hugepage_kib = shape.hugepage_size == "2M" ? kHugePage2M : kHugePage1G;
    auto p = place(host, *req);
    if (!p) return at(shape.pos, "vm." + shape.name, p.error());
    return p;
}

Result<NodeVms> NodeVmPlanner::plan(const config::Fleet& fleet, const config::Node& node) {
    const VmShape* picked = vm_shape(fleet, node);
    if (!picked) {
        return make_error("vm", "vm.config",
                          node.pos.str() + ": nodes." + node.name + ".vm: the node names no vm shape");
    }
    const VmShape& shape = *picked;
    // The fleet-wide ordinal: VMs of the nodes before this one, in order.
    int ordinal = 0;
    for (const auto& other : fleet.nodes) {
        if (other.name == node.name) break;
        const VmShape* os = vm_shape(fleet, other);
        if (!os) continue;
        auto oh = host(os->sysfs);
        if (!oh) return at(os->pos, "vm." + os->name + ".sysfs", oh.error());
        auto op = place_node(fleet, other, *oh);
        if (!op) return op.error();
        ordinal += static_cast<int>(op->vms.size());
    }
    auto h = host(shape.sysfs);
    if (!h) return at(shape.pos, "vm." + shape.name + ".sysfs", h.error());
    auto p = place_node(fleet, node, *h);
    if (!p) return p.error();

    NodeVms out;
    out.shape = &shape;
    out.uri = node.libvirt_uri;
    out.dir = node_vm_dir(fleet, node);
    out.host = std::move(h).value();
    out.placement = std::move(p).value();
    nlohmann::json peers = nlohmann::json::array();
    // Peers: every VM of the fleet, so each rank knows where the others listen.
    {
        int ord = 0;
        for (const auto& other : fleet.nodes) {
            const VmShape* os = vm_shape(fleet, other);
            if (!os) continue;
            auto oh = host(os->sysfs);
            if (!oh) return at(os->pos, "vm." + os->name + ".sysfs", oh.error());
            auto op = place_node(fleet, other, *oh);
            if (!op) return op.error();
            for (size_t i = 0; i < op->vms.size(); ++i, ++ord) {
                nlohmann::json peer = {{"vm", domain_name(other.name, static_cast<int>(i))},
                                       {"node", other.name},
                                       {"ordinal", ord},
                                       {"address", "10.0.2.2"},
                                       {"port", kSmokeHostPortBase + ord}};
                // Only where set, so that fleets without RDMA checks keep their seeds.
                if (os->rdma_checks) peer["rdma_port"] = kRdmaHostPortBase + ord;
                peers.push_back(std::move(peer));
            }
        }
    }
    for (size_t i = 0; i < out.placement.vms.size(); ++i) {
        const VmPlacement& vm = out.placement.vms[i];
        NodeVm v;
        v.index = static_cast<int>(i);
        v.name = domain_name(node.name, v.index);
        v.ordinal = ordinal + v.index;
        v.smoke_host_port = kSmokeHostPortBase + v.ordinal;
        v.files = vm_files(out.dir, v.name);
        auto topo = nccl_topology(out.host, vm);
        if (!topo) return topo.error();
        v.nccl_topology = std::move(topo).value();
        v.seed.hostname = v.name;
        v.seed.ssh_authorized_keys = shape.ssh_authorized_keys;
        v.seed.nccl_topology = v.nccl_topology;
        v.seed.smoke = {{"node", node.name},
                        {"vm", v.name},
                        {"ordinal", v.ordinal},
                        {"guest_port", kGuestSmokePort},
                        {"host_port", v.smoke_host_port},
                        {"host_address", "10.0.2.2"},
                        {"world_size", peers.size()},
                        {"gpus", vm.gpus().size()},
                        {"peers", peers},
                        {"nccl_topo_file", kGuestNcclTopoPath}};
        if (shape.rdma_checks) {
            v.seed.smoke["rdma"] = {{"guest_port", kGuestRdmaPort}, {"host_port", kRdmaHostPortBase + v.ordinal}};
        }
        v.options = domain_options(out.placement, v.name);
        v.options.disk = v.files.overlay;
        v.options.seed_iso = v.files.seed_iso;
        v.options.serial_log = v.files.serial_log;
        v.options.net = parse_net_backend(shape.network);
        v.options.smoke_host_port = v.options.net == NetBackend::none ? 0 : v.smoke_host_port;
        if (shape.rdma_checks && v.options.net != NetBackend::none)
            v.options.rdma_host_port = kRdmaHostPortBase + v.ordinal;
        v.options.fabric_bridge = shape.fabric_bridge;
        auto xml = domain_xml(out.host, vm, v.options);
        if (!xml) return xml.error();
        Sha256 hash;
        hash.update(*xml);
        hash.update(seed_user_data(v.seed));
        hash.update("accelerator=" + shape.accelerator);
        hash.update("base_image=" + shape.base_image);
        v.options.base_identity = base_image_identity(shape.base_image);
        hash.update("base_identity=" + v.options.base_identity);
        v.desired_hash = hash.hex();
        // instance-id changes with the wanted config; reimage adds its own.
        v.seed.instance_id = v.name + "-" + v.desired_hash.substr(0, 12);
        out.vms.push_back(std::move(v));
    }
    return out;
}

Result<VmHostDevices> vm_host_devices(NodeVmPlanner& planner, const config::Fleet& fleet, const config::Node& node,
                                      const std::string& vm) {
    auto vms = planner.plan(fleet, node);
    if (!vms) return vms.error();
    for (const auto& v : vms->vms) {
        if (v.name != vm) continue;
        const auto& placed = vms->placement.vms.at(static_cast<size_t>(v.index));
        VmHostDevices out;
        out.gpus = placed.gpus();
        for (const auto& d : placed.devices())
            if (!std::binary_search(out.gpus.begin(), out.gpus.end(), d)) out.others.push_back(d);
        for (const auto& d : plan_guest_pci(placed).devices) out.guest[d.host] = d.guest;
        return out;
    }
    return make_error("vm", "vm.no_such_vm", fmt::format("node {} has no VM {} in its plan", node.name, vm));
}

Result<std::string> NodeVms::xml(size_t i, Accelerator accel) const {
    DomainOptions o = vms[i].options;
    o.accelerator = accel;
    o.desired_hash = vms[i].desired_hash;
    return domain_xml(host, placement.vms[i], o);
}

}  // namespace kiln::vm
