// The lifecycle against a real libvirtd with TCG, on the cheap probe guest
// (the host's kernel + an initramfs whose /init prints the readiness
// marker): define, start, marker, stop, reimage (a new overlay, same
// domain), teardown leaving nothing defined. Label "heavy": it boots VMs.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "provisioner/vm/accelerator_probe.h"
#include "provisioner/vm/cloud_init_seed.h"
#include "provisioner/vm/domain_manager.h"
#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/libvirt_hypervisor.h"
#include "provisioner/vm/overlay_disk.h"
#include "provisioner/vm/probe_guest.h"
#include "tests/vm/vm_xml_support.h"

using namespace kiln;
using namespace kiln::vm;
namespace fs = std::filesystem;

namespace {

// A folder the QEMU user (libvirt-qemu) can enter, removed at scope end.
struct WorkDir {
    std::string path;
    WorkDir() {
        std::string tmpl = (fs::temp_directory_path() / "kiln-vm-life-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
        ::chmod(path.c_str(), 0755);
    }
    ~WorkDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

ino_t inode(const std::string& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_ino;
}

}  // namespace

TEST_CASE("a TCG guest goes through define, start, ready, stop, reimage and teardown", "[vm][lifecycle]") {
    auto hvr = LibvirtHypervisor::open("");
    if (!hvr) FAIL(hvr.error().str());
    Hypervisor& hv = **hvr;
    ProcessRunner runner;
    DomainManager dm(hv, runner);
    WorkDir dir;
    auto kernel = find_host_kernel();
    REQUIRE(kernel.ok());
    const std::string initrd = dir.path + "/initrd.img";
    REQUIRE(write_probe_initramfs(KILN_PROBE_INIT, initrd).ok());
    const std::string base = dir.path + "/base.qcow2";
    auto mk = runner.run({.argv = {"qemu-img", "create", "-q", "-f", "qcow2", base, "64M"}});
    REQUIRE(mk.ok());
    REQUIRE(mk->success());

    const std::string prefix = "kiln-lifetest" + std::to_string(::getpid()) + "-vm";
    const std::string name = prefix + "0";
    const VmFiles files = vm_files(dir.path, name);
    REQUIRE(create_overlay(runner, base, files.overlay).ok());
    SeedConfig seed;
    seed.instance_id = name + "-1";
    seed.hostname = name;
    seed.nccl_topology = "<system version='1'/>\n";
    REQUIRE(build_seed_iso(runner, seed, files.seed_iso).ok());

    // One cell with an emulated switch and no devices: QEMU itself checks
    // the expander bus, root port and upstream port kiln lays out.
    HostTopology host;
    NumaNode n0;
    n0.cpus = {0};
    host.nodes.push_back(n0);
    VmPlacement vm;
    vm.name = "whole";
    VmCell cell;
    cell.cpus = {0};
    cell.memory_kib = uint64_t{256} * 1024;
    cell.slots.push_back(SwitchSlot{"", {}, {}});
    vm.cells.push_back(cell);
    DomainOptions o;
    o.name = name;
    o.accelerator = Accelerator::tcg;
    o.hugepages = false;
    o.pin = false;
    o.disk = files.overlay;
    o.seed_iso = files.seed_iso;
    o.serial_log = files.serial_log;
    o.direct_boot = DirectBoot{*kernel, initrd, "console=ttyS0 panic=-1 quiet"};
    o.net = NetBackend::slirp;
    o.smoke_host_port = 29600 + (::getpid() % 300);
    o.desired_hash = "h1";
    auto xml = domain_xml(host, vm, o);
    REQUIRE(xml.ok());

    REQUIRE(dm.define(*xml).ok());
    auto uuid_before = test::XmlDoc(*hv.definition(name)).value("/domain/uuid");
    auto started = dm.start(name);
    if (!started) {
        (void)dm.undefine(name);
        FAIL(started.error().str());
    }
    ReadyWait w;
    w.timeout = std::chrono::minutes(5);
    auto ready = dm.wait_ready(name, w);
    if (!ready) {
        (void)dm.undefine(name);
        FAIL(ready.error().str());
    }
    CHECK(ready->detail["guest"] == "kiln-probe");
    CHECK((*hv.lookup(name))->state == DomainState::running);
    CHECK(dm.start(name).ok());  // idempotent on a running domain

    REQUIRE(dm.stop(name).ok());
    CHECK((*hv.lookup(name))->state == DomainState::shutoff);
    CHECK(dm.stop(name).ok());  // and on a stopped one

    const ino_t disk_before = inode(files.overlay);
    REQUIRE(dm.reimage(name, base, files.overlay, /*start_after=*/true).ok());
    CHECK(inode(files.overlay) != disk_before);  // a new overlay
    auto again = dm.wait_ready(name, w);
    REQUIRE(again.ok());
    CHECK(test::XmlDoc(*hv.definition(name)).value("/domain/uuid") == uuid_before);  // same identity

    auto removed = dm.teardown(prefix);
    REQUIRE(removed.ok());
    CHECK(removed->size() == 1);
    auto names = hv.list_names();
    REQUIRE(names.ok());
    for (const auto& nm : *names) CHECK(nm.rfind(prefix, 0) != 0);
    CHECK_FALSE(hv.lookup(name)->has_value());
}

TEST_CASE("the accelerator probe answers TCG without KVM and leaves nothing defined", "[vm][lifecycle]") {
    auto hvr = LibvirtHypervisor::open("");
    if (!hvr) FAIL(hvr.error().str());
    WorkDir dir;
    ProbeOptions o;
    o.kernel = *find_host_kernel();
    o.initrd = dir.path + "/initrd.img";
    REQUIRE(write_probe_initramfs(KILN_PROBE_INIT, o.initrd).ok());
    o.work_dir = dir.path;
    o.kvm_device = dir.path + "/no-kvm-here";
    auto r = probe_accelerator(**hvr, o);
    REQUIRE(r.ok());
    CHECK(r->accelerator == Accelerator::tcg);
    CHECK(r->reason.find("no-kvm-here") != std::string::npos);

    // With the real /dev/kvm: whichever it answers, it explains why and
    // cleans up after itself.
    o.kvm_device = "/dev/kvm";
    o.timeout = std::chrono::seconds(20);
    auto real = probe_accelerator(**hvr, o);
    REQUIRE(real.ok());
    CHECK_FALSE(real->reason.empty());
    if (real->accelerator == Accelerator::kvm) CHECK(real->reason.find("ready") != std::string::npos);
    auto names = (*hvr)->list_names();
    REQUIRE(names.ok());
    for (const auto& nm : *names) CHECK(nm.rfind("kiln-accel-probe-", 0) != 0);
}
