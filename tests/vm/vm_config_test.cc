// The fleet keys the vm stage reads: [vm.NAME] and a node's libvirt_uri,
// with their FILE:LINE:COL errors.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/vm/cloud_init_seed.h"
#include "provisioner/vm/stage/vm_config.h"

using namespace kiln::config;
namespace fs = std::filesystem;

namespace {

struct Loaded {
    std::string dir;
    std::string path;
    LoadResult result;
    ~Loaded() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

std::unique_ptr<Loaded> load(const std::string& toml) {
    auto l = std::make_unique<Loaded>();
    std::string tmpl = (fs::temp_directory_path() / "kiln-vm-config-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    l->dir = tmpl;
    l->path = l->dir + "/fleet.toml";
    std::ofstream(l->path) << toml;
    LoadOptions o;
    o.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
    o.tables = {kiln::vm::vm_table()};
    o.pipelines_dir_override = KILN_CONFIG_PIPELINES;
    l->result = load_fleet(l->path, o);
    return l;
}

const std::string kHead = "schema = 1\n[fleet]\nname = \"t\"\n[[racks]]\nname = \"r1\"\n";  // lines 1-5

}  // namespace

TEST_CASE("vm shape keys load, with paths resolved against the fleet folder", "[vm][config]") {
    auto l =
        load(kHead +
             "[vm.gpu]\nsplit = \"numa\"\nhugepage_size = \"2M\"\naccelerator = \"tcg\"\nnetwork = \"passt\"\n"
             "sysfs = \"hosts/a\"\nimages_dir = \"vms\"\nbase_image = \"img/guest.qcow2\"\nboot_timeout = \"90s\"\n"
             "ssh_authorized_keys = [\"ssh-ed25519 AAAA k@h\"]\n"
             "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"reimage\"\nvm = \"gpu\"\n"
             "libvirt_uri = \"qemu+ssh://root@10.0.0.5/system\"\n");
    for (const auto& e : l->result.errors) INFO(e.str());
    REQUIRE(l->result.fleet.has_value());
    const auto& s = kiln::vm::vm_shapes(*l->result.fleet)->at("gpu");
    CHECK(s.hugepage_size == "2M");
    CHECK(s.accelerator == "tcg");
    CHECK(s.network == "passt");
    CHECK(s.sysfs == l->dir + "/hosts/a");
    CHECK(s.images_dir == l->dir + "/vms");
    CHECK(s.base_image == l->dir + "/img/guest.qcow2");
    CHECK(s.boot_timeout == std::chrono::seconds(90));
    CHECK(s.ssh_authorized_keys == std::vector<std::string>{"ssh-ed25519 AAAA k@h"});
    CHECK(l->result.fleet->nodes[0].libvirt_uri == "qemu+ssh://root@10.0.0.5/system");
    // Defaults.
    auto d = load(kHead + "[vm.gpu]\n");
    REQUIRE(d->result.fleet.has_value());
    CHECK(kiln::vm::vm_shapes(*d->result.fleet)->at("gpu").accelerator == "auto");
    CHECK(kiln::vm::vm_shapes(*d->result.fleet)->at("gpu").sysfs == "/sys");
}

TEST_CASE("bad vm keys are reported at FILE:LINE:COL with their key", "[vm][config]") {
    auto l = load(kHead + "[vm.gpu]\naccelerator = \"xen\"\n");  // line 7
    REQUIRE(l->result.errors.size() == 1);
    const auto& e = l->result.errors[0];
    CHECK(e.pos.line == 7);
    CHECK(e.key == "vm.gpu.accelerator");
    CHECK(e.str().rfind(l->path + ":7:", 0) == 0);

    auto u = load(kHead + "[[nodes]]\nname = \"a\"\nrack = \"r1\"\nrole = \"reimage\"\nlibvirt_uri = \"hostname\"\n");
    REQUIRE(u->result.errors.size() == 1);
    CHECK(u->result.errors[0].pos.line == 10);
    CHECK(u->result.errors[0].key == "nodes[0].libvirt_uri");
    CHECK(u->result.errors[0].message.find("qemu+ssh://") != std::string::npos);
}

// Debian's cloud-init renders to ifupdown, which takes each ethernets key as
// the interface name: a key that is not the NIC's name leaves the guest
// without a network (the smoke ring then cannot reach its peers).
TEST_CASE("the seed's network config names the interface it configures", "[vm][seed]") {
    const auto doc = nlohmann::json::parse(kiln::vm::seed_network_config());
    CHECK(doc["version"] == 2);
    REQUIRE(doc["ethernets"].size() == 1);
    const auto& ethernets = doc["ethernets"];
    const std::string key = ethernets.begin().key();
    const auto& nic = ethernets.begin().value();
    CHECK(nic["match"]["driver"] == "virtio_net");
    CHECK(nic["set-name"] == key);
    CHECK(nic["dhcp4"] == true);
}

TEST_CASE("fabric_bridge turns the RDMA checks on, and a bad bridge name or no port forward is refused",
          "[vm][config]") {
    auto l = load(kHead + "[vm.lab]\nfabric_bridge = \"kilnfab0\"\n[vm.gpu]\nrdma_checks = true\n[vm.plain]\n");
    for (const auto& e : l->result.errors) INFO(e.str());
    REQUIRE(l->result.fleet.has_value());
    CHECK(kiln::vm::vm_shapes(*l->result.fleet)->at("lab").fabric_bridge == "kilnfab0");
    CHECK(kiln::vm::vm_shapes(*l->result.fleet)->at("lab").rdma_checks);
    CHECK(kiln::vm::vm_shapes(*l->result.fleet)->at("gpu").fabric_bridge.empty());
    CHECK(kiln::vm::vm_shapes(*l->result.fleet)->at("gpu").rdma_checks);
    CHECK_FALSE(kiln::vm::vm_shapes(*l->result.fleet)->at("plain").rdma_checks);
    auto off = load(kHead + "[vm.lab]\nfabric_bridge = \"kilnfab0\"\nrdma_checks = false\n");
    REQUIRE(off->result.fleet.has_value());
    CHECK_FALSE(kiln::vm::vm_shapes(*off->result.fleet)->at("lab").rdma_checks);

    auto bad = load(kHead + "[vm.lab]\nfabric_bridge = \"br0; rm -rf /\"\n");  // line 7
    REQUIRE(bad->result.errors.size() == 1);
    CHECK(bad->result.errors[0].pos.line == 7);
    CHECK(bad->result.errors[0].key == "vm.lab.fabric_bridge");
    CHECK(bad->result.errors[0].message.find("Linux bridge name") != std::string::npos);

    auto none = load(kHead + "[vm.lab]\nnetwork = \"none\"\nfabric_bridge = \"kilnfab0\"\n");
    REQUIRE(none->result.errors.size() == 1);
    CHECK(none->result.errors[0].key == "vm.lab.network");
    CHECK(none->result.errors[0].message.find("port forwards") != std::string::npos);
}
