#include "provisioner/vm/pci_config.h"

#include <set>

namespace kiln::vm {

namespace {

uint16_t u16(const std::string& b, size_t at) {
    return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) | static_cast<uint8_t>(b[at + 1]) << 8);
}

uint32_t u32(const std::string& b, size_t at) {
    return static_cast<uint32_t>(u16(b, at)) | static_cast<uint32_t>(u16(b, at + 2)) << 16;
}

PciLink link(uint32_t reg) {
    return PciLink{static_cast<int>(reg & 0xf), static_cast<int>(reg >> 4 & 0x3f)};
}

constexpr uint8_t kCapPcie = 0x10;
constexpr uint16_t kExtAcs = 0x000d;
constexpr uint16_t kExtAts = 0x000f;

}  // namespace

std::string pcie_speed_name(int code) {
    switch (code) {
        case 1:
            return "2.5 GT/s";
        case 2:
            return "5.0 GT/s";
        case 3:
            return "8.0 GT/s";
        case 4:
            return "16.0 GT/s";
        case 5:
            return "32.0 GT/s";
        case 6:
            return "64.0 GT/s";
    }
    return "";
}

PciConfig parse_pci_config(const std::string& b) {
    PciConfig c;
    c.readable = b.size();
    if (b.size() < 64 || !(u16(b, 0x06) & 0x0010)) return c;  // no capability list
    // Classic capabilities: a chain from 0x34; the visited set stops loops.
    std::set<size_t> seen;
    for (size_t at = static_cast<uint8_t>(b[0x34]) & 0xfc; at >= 0x40 && at + 0x14 <= b.size();) {
        if (!seen.insert(at).second) break;
        if (static_cast<uint8_t>(b[at]) == kCapPcie) {
            c.link_cap = link(u32(b, at + 0x0c));
            c.link_status = link(u16(b, at + 0x12));
            break;
        }
        at = static_cast<uint8_t>(b[at + 1]) & 0xfc;
    }
    if (b.size() < 4096) return c;
    c.extended = true;
    seen.clear();
    for (size_t at = 0x100; at >= 0x100 && at + 8 <= b.size();) {
        if (!seen.insert(at).second) break;
        const uint32_t header = u32(b, at);
        if (header == 0 || header == 0xffffffff) break;
        const uint16_t id = header & 0xffff;
        if (id == kExtAcs) c.acs_ctrl = u16(b, at + 6);
        if (id == kExtAts) c.ats_enabled = (u16(b, at + 6) & kAtsEnable) != 0;
        at = header >> 20 & 0xffc;
        if (at == 0) break;
    }
    return c;
}

}  // namespace kiln::vm
