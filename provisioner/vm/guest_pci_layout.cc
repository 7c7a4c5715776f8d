#include "provisioner/vm/guest_pci_layout.h"

#include <cstdio>

namespace kiln::vm {

std::string guest_bdf(int bus, int slot, int function) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0000:%02x:%02x.%x", bus & 0xff, slot & 0x1f, function & 7);
    return buf;
}

const GuestController* GuestPciLayout::controller(int index) const {
    for (const auto& c : controllers) {
        if (c.index == index) return &c;
    }
    return nullptr;
}

const GuestDevice* GuestPciLayout::device(const std::string& host_address) const {
    for (const auto& d : devices) {
        if (d.host == host_address) return &d;
    }
    return nullptr;
}

GuestPciLayout plan_guest_pci(const VmPlacement& vm) {
    GuestPciLayout out;
    int next = 1;
    int root_slot = 1;  // slot 0 of pcie-root is the host bridge
    std::vector<size_t> expanders;
    std::vector<int> need;  // per expander: its own bus plus every bus below it
    for (size_t c = 0; c < vm.cells.size(); ++c) {
        const VmCell& cell = vm.cells[c];
        if (cell.slots.empty() && cell.nvswitches.empty()) continue;
        GuestController pxb{next++, "pcie-expander-bus", 0, root_slot++};
        pxb.cell = static_cast<int>(c);
        expanders.push_back(out.controllers.size());
        out.controllers.push_back(pxb);
        int buses = 1;
        int port_slot = 0;
        for (const auto& s : cell.slots) {
            GuestController rp{next++, "pcie-root-port", pxb.index, port_slot++};
            GuestController up{next++, "pcie-switch-upstream-port", rp.index, 0};
            up.host_switch = s.host_switch;
            out.controllers.push_back(rp);
            out.controllers.push_back(up);
            buses += 2;
            int down_slot = 0;
            std::vector<std::string> devs = s.gpus;
            devs.insert(devs.end(), s.nics.begin(), s.nics.end());
            for (const auto& d : devs) {
                GuestController dn{next++, "pcie-switch-downstream-port", up.index, down_slot++};
                out.controllers.push_back(dn);
                const size_t head = out.devices.size();
                out.devices.push_back(GuestDevice{d, "", dn.index, static_cast<int>(c), ""});
                // Companions are functions of the GPU's device ("dddd:bb:dd.").
                const std::string device = d.substr(0, d.size() - 1);
                for (const auto& f : s.companions) {
                    if (f.rfind(device, 0) != 0) continue;
                    out.devices[head].multifunction = true;
                    GuestDevice fd{f, "", dn.index, static_cast<int>(c), ""};
                    fd.function = f.back() - '0';
                    out.devices.push_back(fd);
                }
                ++buses;
            }
        }
        for (const auto& nv : cell.nvswitches) {
            GuestController rp{next++, "pcie-root-port", pxb.index, port_slot++};
            out.controllers.push_back(rp);
            out.devices.push_back(GuestDevice{nv, "", rp.index, static_cast<int>(c), ""});
            ++buses;
        }
        need.push_back(buses);
    }
    int top = 256;
    for (size_t i = expanders.size(); i-- > 0;) {
        top -= need[i];
        out.controllers[expanders[i]].bus_nr = top;
    }
    // Guest bus numbers, depth first from each expander's busNr. Children
    // come after their parent in `controllers`, in slot order, so one pass
    // in order is a depth-first walk per port chain.
    std::vector<int> bus_of(static_cast<size_t>(next), 0);
    int counter = 0;
    for (auto& c : out.controllers) {
        if (c.model == "pcie-expander-bus") {
            counter = c.bus_nr;
            c.guest_bus = counter;
        } else {
            c.guest_bus = ++counter;
        }
        bus_of[static_cast<size_t>(c.index)] = c.guest_bus;
    }
    for (auto& d : out.devices) {
        d.guest = guest_bdf(bus_of[static_cast<size_t>(d.port)], 0, d.function);
        const GuestController* port = out.controller(d.port);
        if (port->model == "pcie-switch-downstream-port") {
            const GuestController* up = out.controller(port->parent);
            d.upstream = guest_bdf(bus_of[static_cast<size_t>(up->parent)], up->slot);
        }
    }
    return out;
}

}  // namespace kiln::vm
