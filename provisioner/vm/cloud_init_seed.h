// The cloud-init NoCloud seed of one VM: an ISO 9660 image with volume id
// "cidata" holding user-data, meta-data and network-config, built with
// genisoimage (or xorriso's mkisofs mode) through the CommandRunner.
//
// user-data creates the user with its SSH keys and writes the smoke job's
// config (/etc/kiln/smoke.json) and the VM's NCCL topology file
// (/etc/kiln/nccl-topo.xml, exported as NCCL_TOPO_FILE in
// /etc/environment). cloud-init reads YAML, and JSON is YAML: the documents
// are written as JSON so no value needs YAML quoting.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"
#include "provisioner/vm/guest_contract.h"  // kGuestSmokeConfigPath

namespace kiln::vm {

inline constexpr const char* kGuestNcclTopoPath = "/etc/kiln/nccl-topo.xml";

struct SeedConfig {
    std::string instance_id;  // changes with every new disk so cloud-init runs again
    std::string hostname;
    std::string user = "kiln";
    std::vector<std::string> ssh_authorized_keys;
    nlohmann::json smoke = nlohmann::json::object();
    std::string nccl_topology;  // "" = none
};

std::string seed_user_data(const SeedConfig& seed);
std::string seed_meta_data(const SeedConfig& seed);
std::string seed_network_config();

// Writes the ISO at `iso_path` (replacing it). Errors: "vm.seed".
Status build_seed_iso(CommandRunner& runner, const SeedConfig& seed, const std::string& iso_path);

}  // namespace kiln::vm
