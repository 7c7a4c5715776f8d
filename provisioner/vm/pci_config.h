// What kiln reads from a function's PCI configuration space (sysfs `config`,
// binary): the PCI Express capability's link capability and status, and the
// extended capabilities ACS (ID 0x000d) and ATS (ID 0x000f). Only root reads
// past the first 64 bytes on Linux (256 for the PCIe capability, 4096 for
// the extended ones), so each part is known only when that much was read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::vm {

struct PciLink {
    int speed = 0;  // PCIe encoding: 1 = 2.5 GT/s, 2 = 5, 3 = 8, 4 = 16, 5 = 32, 6 = 64
    int width = 0;  // lanes
};

struct PciConfig {
    size_t readable = 0;  // bytes the file gave
    std::optional<PciLink> link_cap;
    std::optional<PciLink> link_status;
    bool extended = false;             // 4096 bytes read: absence of ACS/ATS below is real
    std::optional<uint16_t> acs_ctrl;  // ACS Control; none without the capability
    std::optional<bool> ats_enabled;   // ATS Control's Enable bit; none without the capability
};

// Config bits (PCIe base spec 7.7.7, 7.7.8).
inline constexpr uint16_t kAcsP2pReqRedirect = 0x0004;
inline constexpr uint16_t kAcsP2pCmpltRedirect = 0x0008;
inline constexpr uint16_t kAtsEnable = 0x8000;

// Parses the bytes of a `config` file; a malformed capability chain stops
// the walk (what was found before it is kept).
PciConfig parse_pci_config(const std::string& bytes);

// "16.0 GT/s" for 4; "" for codes kiln does not know.
std::string pcie_speed_name(int code);

}  // namespace kiln::vm
