// The host model for people and programs: `kiln host inspect` prints
// describe(), `kiln host inspect --json` prints to_json().
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/vm/host_topology.h"

namespace kiln::vm {

// Stable keys, sorted arrays; ids as "0x10de" strings, as sysfs writes them.
nlohmann::json to_json(const HostTopology& host);
nlohmann::json to_json(const PciDevice& dev);

// Several lines: a summary, then per NUMA node its CPUs, memory, hugepages
// and the devices under each PCIe switch with their pairing.
std::string describe(const HostTopology& host);

}  // namespace kiln::vm
