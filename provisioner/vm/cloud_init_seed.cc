#include "provisioner/vm/cloud_init_seed.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kiln::vm {

namespace fs = std::filesystem;
using nlohmann::json;

std::string seed_user_data(const SeedConfig& seed) {
    json user = {{"name", seed.user},
                 {"groups", json::array({"sudo"})},
                 {"shell", "/bin/bash"},
                 {"sudo", "ALL=(ALL) NOPASSWD:ALL"},
                 {"lock_passwd", true}};
    if (!seed.ssh_authorized_keys.empty()) user["ssh_authorized_keys"] = seed.ssh_authorized_keys;
    json files = json::array();
    files.push_back({{"path", kGuestSmokeConfigPath}, {"permissions", "0644"}, {"content", seed.smoke.dump(2) + "\n"}});
    if (!seed.nccl_topology.empty()) {
        files.push_back({{"path", kGuestNcclTopoPath}, {"permissions", "0644"}, {"content", seed.nccl_topology}});
        files.push_back({{"path", "/etc/environment"},
                         {"append", true},
                         {"content", std::string("NCCL_TOPO_FILE=") + kGuestNcclTopoPath + "\n"}});
    }
    json doc = {{"hostname", seed.hostname},
                {"users", json::array({"default", user})},
                {"ssh_pwauth", false},
                {"write_files", files}};
    return "#cloud-config\n" + doc.dump(2) + "\n";
}

std::string seed_meta_data(const SeedConfig& seed) {
    return json{{"instance-id", seed.instance_id}, {"local-hostname", seed.hostname}}.dump(2) + "\n";
}

std::string seed_network_config() {
    // Network config v2: DHCP on the virtio NIC (QEMU user networking or
    // passt answers it). Passed-through RDMA NICs are left to the guest.
    // set-name: renderers without match support (Debian's ifupdown/ENI)
    // write the entry's key as the interface name, so the key must be the
    // name the NIC ends up with; cloud-init renames it before networking.
    json doc = {
        {"version", 2},
        {"ethernets",
         {{"eth0", {{"match", {{"driver", "virtio_net"}}}, {"set-name", "eth0"}, {"dhcp4", true}, {"dhcp6", false}}}}}};
    return doc.dump(2) + "\n";
}

Status build_seed_iso(CommandRunner& runner, const SeedConfig& seed, const std::string& iso_path) {
    std::error_code ec;
    const fs::path iso(iso_path);
    fs::create_directories(iso.parent_path(), ec);
    std::string tmpl = (iso.parent_path() / ".seed-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return make_error("vm", "vm.seed", "cannot make a folder beside " + iso_path);
    const fs::path dir(tmpl);
    struct Cleanup {
        fs::path p;
        ~Cleanup() {
            std::error_code e;
            fs::remove_all(p, e);
        }
    } cleanup{dir};
    const std::pair<const char*, std::string> files[] = {{"user-data", seed_user_data(seed)},
                                                         {"meta-data", seed_meta_data(seed)},
                                                         {"network-config", seed_network_config()}};
    for (const auto& [name, text] : files) {
        std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out.good()) return make_error("vm", "vm.seed", "cannot write " + (dir / name).string());
    }
    const fs::path tmp_iso = iso.string() + ".tmp";
    std::vector<std::string> tail = {"-output",
                                     tmp_iso.string(),
                                     "-volid",
                                     "cidata",
                                     "-joliet",
                                     "-rock",
                                     (dir / "user-data").string(),
                                     (dir / "meta-data").string(),
                                     (dir / "network-config").string()};
    CommandSpec spec;
    spec.timeout = std::chrono::seconds(60);
    spec.argv = {"genisoimage", "-quiet"};
    spec.argv.insert(spec.argv.end(), tail.begin(), tail.end());
    auto r = runner.run(spec);
    if (!r) {  // genisoimage missing: xorriso speaks the same options
        spec.argv = {"xorriso", "-as", "mkisofs", "-quiet"};
        spec.argv.insert(spec.argv.end(), tail.begin(), tail.end());
        r = runner.run(spec);
    }
    if (!r) return make_error("vm", "vm.seed", "neither genisoimage nor xorriso could run: " + r.error().message);
    if (!r->success()) {
        std::string err = r->err.substr(0, 300);
        while (!err.empty() && err.back() == '\n') err.pop_back();
        return make_error("vm", "vm.seed", describe_argv({spec.argv[0]}) + " failed building " + iso_path + ": " + err);
    }
    fs::rename(tmp_iso, iso, ec);
    if (ec) return make_error("vm", "vm.seed", "cannot move the seed into place at " + iso_path + ": " + ec.message());
    return ok_status();
}

}  // namespace kiln::vm
