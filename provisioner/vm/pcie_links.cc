#include "provisioner/vm/pcie_links.h"

#include <cstdlib>
#include <set>

#include <fmt/format.h>

namespace kiln::vm {

double pcie_gts(const std::string& speed) {
    if (speed.empty()) return 0;
    char* end = nullptr;
    const double v = std::strtod(speed.c_str(), &end);
    if (end == speed.c_str() || v <= 0) return 0;
    return v;
}

namespace {

// One function's link against its capability; false when not reported.
bool compare_link(const PciDevice& dev, bool check_speed, PcieLinkCheck& out) {
    const int width = dev.link_width.value_or(0), max_width = dev.max_link_width.value_or(0);
    const double speed = pcie_gts(dev.link_speed), max_speed = pcie_gts(dev.max_link_speed);
    if (width <= 0 || max_width <= 0 || (check_speed && (speed <= 0 || max_speed <= 0))) return false;
    ++out.links;
    std::vector<std::string> low;
    if (width < max_width) low.push_back(fmt::format("x{} of x{}", width, max_width));
    if (check_speed && speed < max_speed) low.push_back(fmt::format("{} of {}", dev.link_speed, dev.max_link_speed));
    if (!low.empty()) {
        std::string text = dev.label() + ": link trained at ";
        for (size_t i = 0; i < low.size(); ++i) text += (i ? ", " : "") + low[i];
        out.faults.push_back(std::move(text));
    }
    return true;
}

// NVIDIA's GPUs and NVSwitches idle their links down; so does every other
// function of their device (a GPU's HD audio reports the GPU's link).
bool idles_down(const HostTopology& host, const PciDevice& dev) {
    if (dev.kind == DeviceKind::gpu || dev.kind == DeviceKind::nvswitch) return true;
    const size_t dot = dev.address.rfind('.');
    if (dot == std::string::npos) return false;
    const PciDevice* fn0 = host.device(dev.address.substr(0, dot) + ".0");
    return fn0 != nullptr && fn0 != &dev && (fn0->kind == DeviceKind::gpu || fn0->kind == DeviceKind::nvswitch);
}

}  // namespace

PcieLinkCheck check_pcie_links(const HostTopology& host, const std::vector<std::string>& addresses) {
    PcieLinkCheck out;
    std::set<std::string> seen;
    auto visit = [&](const PciDevice& dev, bool idle_link) {
        if (!seen.insert(dev.address).second) return;
        if (!compare_link(dev, !idle_link, out)) out.unread.push_back(dev.label());
    };
    for (const auto& a : addresses) {
        const PciDevice* dev = host.device(a);
        if (dev == nullptr) continue;
        if (dev->is_vf()) dev = host.device(dev->physfn);
        if (dev == nullptr) continue;
        const bool gpu = idles_down(host, *dev);
        visit(*dev, gpu);
        // Each bridge reports the link below it: the nearest one shares the
        // device's own link (and a GPU's idle speed), the others the links
        // up to the root port.
        for (size_t i = dev->bridges.size(); i-- > 0;) {
            const PciDevice* bridge = host.device(dev->bridges[i]);
            if (bridge == nullptr) continue;
            visit(*bridge, gpu && i + 1 == dev->bridges.size());
        }
    }
    return out;
}

}  // namespace kiln::vm
