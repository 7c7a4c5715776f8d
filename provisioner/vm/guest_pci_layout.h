// The guest's PCIe tree for one VM, planned once and used by both the
// domain XML (controllers and hostdev addresses) and the guest's NCCL
// topology file (the bus ids the guest will see).
//
// Per guest NUMA cell that has devices: a pcie-expander-bus on the root
// complex carrying the cell's <node>; under it, per host switch slot, a
// root port with an emulated switch (upstream port + one downstream port
// per device: the slot's GPUs, then its NIC functions); per NVSwitch, a
// root port of its own. A GPU's companions (audio, USB) share its port as
// further functions of one guest device, as on the host.
//
// Controller indices are libvirt's bus numbers (a device's <address bus=>
// names its parent's index). Guest bus numbers are what the firmware
// assigns: each expander's busNr, then depth first below it, one bus per
// port. Each expander owns [busNr, next expander's busNr); busNr is
// allocated from 255 down, as libvirt itself does.
#pragma once

#include <string>
#include <vector>

#include "provisioner/vm/host_topology.h"
#include "provisioner/vm/placement.h"

namespace kiln::vm {

struct GuestController {
    int index = 0;
    std::string model;  // pcie-expander-bus, pcie-root-port, pcie-switch-upstream-port, pcie-switch-downstream-port
    int parent = 0;     // index of the controller whose bus it plugs into (0: pcie-root)
    int slot = 0;       // on the parent's bus
    int bus_nr = -1;    // expander buses: busNr
    int cell = -1;      // expander buses: the guest NUMA cell (<node>)
    int guest_bus = 0;  // the bus number the guest sees for the bus this controller provides
    std::string host_switch;  // upstream ports: the host switch mirrored; "" for none
};

struct GuestDevice {
    std::string host;   // host address passed through
    std::string guest;  // guest address, "0000:83:00.0"
    int port = 0;       // index of the downstream or root port above it
    int cell = 0;
    std::string upstream;        // index-free id of its guest switch: the upstream port's guest address; "" for none
    int function = 0;            // a GPU's companion keeps its host function number beside the GPU
    bool multifunction = false;  // function 0 of a device with companions
};

struct GuestPciLayout {
    std::vector<GuestController> controllers;
    std::vector<GuestDevice> devices;

    const GuestController* controller(int index) const;
    const GuestDevice* device(const std::string& host_address) const;
};

GuestPciLayout plan_guest_pci(const VmPlacement& vm);

// "0000:bb:ss.f" for a guest bus, slot and function.
std::string guest_bdf(int bus, int slot, int function = 0);

}  // namespace kiln::vm
