#include "provisioner/vm/pci_device.h"

#include <cstdio>

namespace kiln::vm {

bool is_pci_address(std::string_view s) {
    // dddd:bb:dd.f; VMD domains have five or more digits ("10000:e0:1d.0").
    const size_t colon = s.find(':');
    if (colon == std::string_view::npos || colon < 4 || colon > 8 || s.size() != colon + 8) return false;
    const std::string_view rest = s.substr(colon);
    if (rest[3] != ':' || rest[6] != '.') return false;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == colon || i == colon + 3 || i == colon + 6) continue;
        const char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return s.back() <= '7';  // function 0-7
}

const char* kind_name(DeviceKind kind) {
    switch (kind) {
        case DeviceKind::gpu:
            return "gpu";
        case DeviceKind::nvswitch:
            return "nvswitch";
        case DeviceKind::nic:
            return "nic";
        case DeviceKind::bridge:
            return "bridge";
        case DeviceKind::other:
            return "other";
    }
    return "other";
}

DeviceKind classify(uint16_t vendor, uint32_t class_code) {
    const uint32_t sub = class_code >> 8;
    if (vendor == kVendorNvidia && (sub == 0x0302 || sub == 0x0300)) return DeviceKind::gpu;
    if (vendor == kVendorNvidia && sub == 0x0680) return DeviceKind::nvswitch;
    if (sub == 0x0200 || sub == 0x0207) return DeviceKind::nic;
    if (sub == 0x0604) return DeviceKind::bridge;
    return DeviceKind::other;
}

std::string PciDevice::id() const {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%04x:%04x", vendor, device);
    return buf;
}

std::string PciDevice::label() const {
    std::string out = std::string(kind_name(kind)) + " " + address + " (" + id();
    if (kind == DeviceKind::other) {
        char buf[24];
        std::snprintf(buf, sizeof buf, ", class 0x%06x", class_code);
        out += buf;
    }
    return out + ")";
}

}  // namespace kiln::vm
