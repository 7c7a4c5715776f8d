// The real guest: the vm stage brings up a VM from the gpu-guest-lite image
// (published by the image module's gpu_guest_lite_image ctest fixture)
// through the real libvirtd with TCG on this host's own sysfs (no GPUs:
// no passthrough), waits for the guest's KILN_READY, reimages it, and
// tears it down leaving nothing defined. Label "heavy".
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "provisioner/vm/domain_manager.h"
#include "provisioner/vm/libvirt_hypervisor.h"
#include "provisioner/vm/readiness.h"
#include "provisioner/vm/stage/vm_stage.h"

using namespace kiln;
using namespace kiln::vm;
namespace fs = std::filesystem;

TEST_CASE("the vm stage boots gpu-guest-lite to KILN_READY, reimages it and tears it down", "[vm][guest]") {
    const std::string image = KILN_GUEST_IMAGE;
    INFO("guest image " << image << " (built by the gpu_guest_lite_image fixture)");
    REQUIRE(fs::exists(image));
    std::string tmpl = (fs::temp_directory_path() / "kiln-vm-guest-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    const std::string dir = tmpl;
    ::chmod(dir.c_str(), 0755);  // QEMU runs as libvirt-qemu

    config::Fleet fleet;
    fleet.dir = dir;
    vm::VmShape shape;
    shape.name = "lab-small";
    shape.split = "whole";
    shape.vcpus = 2;
    shape.memory_gib = 2;
    shape.hugepages = false;
    shape.sysfs = "/sys";
    shape.accelerator = "tcg";
    shape.base_image = image;
    shape.images_dir = dir + "/vms";
    shape.boot_timeout = std::chrono::minutes(15);
    vm::add_vm_shape(fleet, shape);
    config::Node node;
    node.name = "guesttest" + std::to_string(::getpid());
    node.set_profile(vm::kVmTable, shape.name);
    fleet.nodes.push_back(node);

    engine::StopToken stop;
    engine::StageContext ctx(fleet, fleet.nodes[0], "vm", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(40), nullptr, nullptr);
    VmStage stage(default_vm_stage_deps());
    auto hv = LibvirtHypervisor::open("");
    REQUIRE(hv.ok());
    ProcessRunner runner;
    DomainManager dm(**hv, runner);
    const std::string prefix = "kiln-" + node.name + "-vm";
    struct Teardown {
        DomainManager& dm;
        std::string prefix;
        std::string dir;
        ~Teardown() {
            (void)dm.teardown(prefix);
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } teardown{dm, prefix, dir};

    auto converge = [&]() -> Status {
        auto obs = stage.observe(ctx);
        if (!obs) return obs.error();
        auto plan = stage.plan(ctx, *obs);
        if (!plan) return plan.error();
        for (const auto& a : *plan) {
            if (auto s = stage.apply(ctx, a); !s) return s;
        }
        return stage.verify(ctx);
    };
    auto first = converge();
    if (!first) FAIL(first.error().str());
    const std::string name = prefix + "0";
    auto serial = (*hv)->serial_output(name);
    REQUIRE(serial.ok());
    auto marker = find_ready_marker(*serial);
    REQUIRE(marker);
    CHECK(marker->detail.contains("cloud_init"));

    ctx.set_reimage(true);
    const std::string disk = dir + "/vms/" + node.name + "/" + name + ".qcow2";
    struct stat before {};
    REQUIRE(::stat(disk.c_str(), &before) == 0);
    auto second = converge();
    if (!second) FAIL(second.error().str());
    struct stat after {};
    REQUIRE(::stat(disk.c_str(), &after) == 0);
    CHECK(after.st_ino != before.st_ino);

    auto removed = dm.teardown(prefix);
    REQUIRE(removed.ok());
    CHECK(removed->size() == 1);
    auto names = (*hv)->list_names();
    REQUIRE(names.ok());
    for (const auto& n : *names) CHECK(n.rfind(prefix, 0) != 0);
}
