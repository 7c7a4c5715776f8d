#include "provisioner/vm/stage/vm_inputs.h"

#include "provisioner/vm/stage/vm_config.h"

namespace kiln::vm {

nlohmann::json vm_inputs(const config::Fleet& fleet, const config::Node& node) {
    nlohmann::json shape = nullptr;
    if (const VmShape* picked = vm_shape(fleet, node)) {
        const auto& s = *picked;
        shape = {{"split", s.split},
                 {"vcpus", s.vcpus},
                 {"memory_gib", s.memory_gib},
                 {"hugepages", s.hugepages},
                 {"hugepage_size", s.hugepage_size},
                 {"accelerator", s.accelerator},
                 {"network", s.network},
                 {"sysfs", s.sysfs},
                 {"images_dir", s.images_dir},
                 {"base_image", s.base_image},
                 {"ssh_authorized_keys", s.ssh_authorized_keys}};
        if (s.split == "count") shape["count"] = s.count;
        if (!s.fabric_bridge.empty()) shape["fabric_bridge"] = s.fabric_bridge;
        if (s.rdma_checks) shape["rdma_checks"] = true;
    }
    // "image": the image stage's node key (images/stage/image_config.h).
    return {{"shape", shape}, {"image", node.profile("image")}, {"libvirt_uri", node.libvirt_uri}};
}

}  // namespace kiln::vm
