#include "provisioner/vm/stage/vm_config.h"

#include "provisioner/config/toml_reader.h"

namespace kiln::vm {

namespace {

using config::TableReader;

VmShape read_vm(const std::string& name, TableReader& r, config::TableScope& scope) {
    VmShape p;
    p.name = name;
    p.pos = r.pos();
    if (auto v = r.choice("split", {"whole", "numa", "count"})) p.split = *v;
    if (auto v = r.integer("count", 1, 64)) p.count = static_cast<int>(*v);
    if (p.split == "count" && p.count == 0) {
        config::pair_error(r, "count", "split", "split = \"count\" needs count = N (1..64)",
                           "split = \"count\" needs count = N (1..64)");
    } else if (p.split != "count" && p.count != 0) {
        config::pair_error(r, "count", "split", "count is only for split = \"count\"",
                           "count is only for split = \"count\"");
    }
    if (auto v = r.integer("vcpus", 0, 4096)) p.vcpus = static_cast<int>(*v);
    if (auto v = r.integer("memory_gib", 0, 65536)) p.memory_gib = static_cast<int>(*v);
    if (auto v = r.boolean("hugepages")) p.hugepages = *v;
    if (auto v = r.choice("hugepage_size", {"1G", "2M"})) p.hugepage_size = *v;
    if (auto v = r.choice("accelerator", {"auto", "kvm", "tcg"})) p.accelerator = *v;
    if (auto v = r.choice("network", {"slirp", "passt", "none"})) p.network = *v;
    if (auto v = r.str("sysfs")) p.sysfs = v->empty() ? "/sys" : scope.path(*v);
    if (auto v = r.str("images_dir")) p.images_dir = v->empty() ? "" : scope.path(*v);
    if (auto v = r.str("base_image")) p.base_image = v->empty() ? "" : scope.path(*v);
    if (auto v = r.duration("boot_timeout")) p.boot_timeout = *v;
    if (auto v = r.integer("tcg_parallel_boots", 1, 1024)) p.tcg_parallel_boots = static_cast<int>(*v);
    if (auto v = r.strings("ssh_authorized_keys")) p.ssh_authorized_keys = *v;
    if (auto v = r.str("fabric_bridge")) {
        if (!config::is_linux_ifname(*v))
            r.ctx().error(r.table().get("fabric_bridge")->source(), r.key_path("fabric_bridge"),
                          "expected a Linux bridge name (1-15 of A-Z a-z 0-9 _ . -)");
        else
            p.fabric_bridge = *v;
    }
    p.rdma_checks = !p.fabric_bridge.empty();
    if (auto v = r.boolean("rdma_checks")) p.rdma_checks = *v;
    if (p.rdma_checks && p.network == "none")
        config::pair_error(r, "rdma_checks", "network",
                           "the smoke job's RDMA checks need the VMs' port forwards: network = \"none\" has none",
                           "the smoke job's RDMA checks need the VMs' port forwards: network = \"none\" has none");
    return p;
}

}  // namespace

config::ConfigTable vm_table() {
    return config::named_profiles_table<VmShape>(kVmTable, kVmTable, read_vm);
}

const config::Profiles<VmShape>* vm_shapes(const config::Fleet& fleet) {
    return fleet.table<config::Profiles<VmShape>>(kVmTable);
}

const VmShape* vm_shape(const config::Fleet& fleet, const config::Node& node) {
    return fleet.picked<VmShape>(kVmTable, node, kVmTable);
}

void add_vm_shape(config::Fleet& fleet, VmShape shape) {
    config::add_profile(fleet, kVmTable, std::move(shape));
}

VmShape* mutable_vm_shape(config::Fleet& fleet, const std::string& name) {
    return config::mutable_profile<VmShape>(fleet, kVmTable, name);
}

}  // namespace kiln::vm
