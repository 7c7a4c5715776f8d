// One PCI function as sysfs shows it, and what kiln takes it for.
// Addresses are kept as the kernel writes them ("0000:07:00.0": fixed
// width, lowercase hex), so sorting the strings sorts by domain/bus/dev/fn.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "provisioner/vm/pci_config.h"

namespace kiln::vm {

// True for "dddd:bb:dd.f" in lowercase hex, as under /sys/bus/pci/devices.
bool is_pci_address(std::string_view s);

enum class DeviceKind {
    gpu,       // vendor 0x10de, class 0x0302xx (3D) or 0x0300xx (VGA)
    nvswitch,  // vendor 0x10de, class 0x0680xx
    nic,       // class 0x0200xx (Ethernet) or 0x0207xx (InfiniBand)
    bridge,    // class 0x0604xx: root ports and switch ports
    other,
};

const char* kind_name(DeviceKind kind);
DeviceKind classify(uint16_t vendor, uint32_t class_code);

inline constexpr uint16_t kVendorNvidia = 0x10de;

// ACS Control register bits (PCIe base spec 7.7.8.3), as recorded in a
// fixture's acs_ctrl file.
inline constexpr uint16_t kAcsReqRedirect = 0x0004;
inline constexpr uint16_t kAcsCompletionRedirect = 0x0008;

struct PciDevice {
    std::string address;  // "0000:13:00.0"
    uint16_t vendor = 0;
    uint16_t device = 0;
    uint32_t class_code = 0;  // 24 bits: class, subclass, prog-if
    DeviceKind kind = DeviceKind::other;
    int numa_node = -1;              // as reported; -1 when firmware gives none
    std::optional<int> iommu_group;  // none when the IOMMU is off
    std::string driver;              // bound driver, "" when unbound

    // The bridges above it, root port first (from the canonical sysfs path
    // /sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/...), and the host
    // bridge it hangs from ("pci0000:10").
    std::vector<std::string> bridges;
    std::string host_bridge;

    // SR-IOV: counts on a PF that supports it; links either way.
    std::optional<int> sriov_totalvfs;
    std::optional<int> sriov_numvfs;
    std::string physfn;                // a VF's PF; "" for anything else
    std::vector<std::string> virtfns;  // a PF's VFs, in virtfn order

    std::vector<std::string> rdma_devices;  // infiniband/* names: "mlx5_0"
    std::vector<std::string> rdma_guids;    // node_guid of each, same order
    // ACS Control register of a bridge when recorded (see acs_ctrl in
    // tests/fixtures/sysfs/README.md); sysfs itself does not expose it.
    std::optional<uint16_t> acs_ctrl;
    // current_link_speed ("16.0 GT/s PCIe") and current_link_width, when
    // the kernel reports them. A VF reads "Unknown" and 0 (kept as empty);
    // an idle GPU trains down to 2.5 GT/s, so the capability below is what
    // describes the path.
    std::string link_speed;
    std::optional<int> link_width;
    // max_link_speed / max_link_width: what the link can do.
    std::string max_link_speed;
    std::optional<int> max_link_width;

    // The parsed `config` file, when there is one (pci_config.h).
    std::optional<PciConfig> config;

    bool is_vf() const { return !physfn.empty(); }
    bool is_infiniband() const { return (class_code >> 8) == 0x0207; }
    // "10de:2330"
    std::string id() const;
    // "gpu 0000:13:00.0 (10de:2330)"; for unrelated devices the class too.
    std::string label() const;
};

}  // namespace kiln::vm
