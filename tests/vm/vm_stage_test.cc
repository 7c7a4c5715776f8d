#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/node_vms.h"
#include "provisioner/vm/stage/vm_stage.h"
#include "tests/vm/fake_hypervisor.h"
#include "tests/vm/pci_config_fake_host.h"
#include "tests/vm/sysfs_fixture.h"

using namespace kiln;
using namespace kiln::vm;
namespace fs = std::filesystem;

namespace {

// Hands the stage a connection to the test's one FakeHypervisor.
class Borrowed : public Hypervisor {
public:
    explicit Borrowed(Hypervisor& h) : h_(h) {}
    std::string uri() const override { return h_.uri(); }
    Status define(const std::string& xml) override { return h_.define(xml); }
    Status start(const std::string& n) override { return h_.start(n); }
    Status stop(const std::string& n) override { return h_.stop(n); }
    Status undefine(const std::string& n) override { return h_.undefine(n); }
    Result<std::optional<DomainInfo>> lookup(const std::string& n) override { return h_.lookup(n); }
    Result<std::string> definition(const std::string& n) override { return h_.definition(n); }
    Result<std::vector<std::string>> list_names() override { return h_.list_names(); }
    Result<std::string> serial_output(const std::string& n) override { return h_.serial_output(n); }
    Result<std::string> guest_file(const std::string& n, const std::string& p) override { return h_.guest_file(n, p); }

private:
    Hypervisor& h_;
};

struct StageFixture {
    std::string dir;
    test::FakeHypervisor hv;
    config::Fleet fleet;
    engine::StopToken stop;
    int probes = 0;
    // When set, the fixture's sysfs is taken as a live host whose config space this holds.
    std::shared_ptr<test::PciConfigFakeHost> pci;

    explicit StageFixture(const std::string& sysfs_fixture, const std::string& split = "numa") {
        std::string tmpl = (fs::temp_directory_path() / "kiln-vm-stage-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        dir = tmpl;
        ProcessRunner runner;
        auto r = runner.run({.argv = {"qemu-img", "create", "-q", "-f", "qcow2", dir + "/base.qcow2", "16M"}});
        REQUIRE(r.ok());
        REQUIRE(r->success());
        fleet.dir = dir;
        vm::VmShape shape;
        shape.name = "gpu";
        shape.split = split;
        shape.sysfs = test::fixture_root(sysfs_fixture);
        shape.base_image = dir + "/base.qcow2";
        shape.images_dir = dir + "/vms";
        shape.accelerator = "auto";
        shape.boot_timeout = std::chrono::seconds(30);
        shape.pos = {"fleet.toml", 40, 1};
        vm::add_vm_shape(fleet, shape);
        for (const char* name : {"gpu-01", "gpu-02"}) {
            config::Node n;
            n.name = name;
            n.set_profile(vm::kVmTable, "gpu");
            n.pos = {"fleet.toml", 50, 1};
            fleet.nodes.push_back(n);
        }
    }
    ~StageFixture() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }

    VmStage stage() {
        VmStageDeps d;
        d.connect = [this](const std::string&) -> Result<std::unique_ptr<Hypervisor>> {
            return std::unique_ptr<Hypervisor>(new Borrowed(hv));
        };
        d.runner = std::make_shared<ProcessRunner>();
        d.probe = [this](Hypervisor&, const std::string&) -> Result<ProbeResult> {
            ++probes;
            return ProbeResult{Accelerator::tcg, "fake probe"};
        };
        d.host_pci = [this](const std::string&) -> std::shared_ptr<CommandRunner> { return pci; };
        return VmStage(d);
    }
    engine::StageContext ctx(size_t node = 0) {
        return engine::StageContext(fleet, fleet.nodes[node], "vm", stop,
                                    engine::StageContext::Clock::now() + std::chrono::minutes(5), nullptr, nullptr);
    }
};

std::vector<std::string> ids(const std::vector<engine::Action>& actions) {
    std::vector<std::string> out;
    for (const auto& a : actions) out.push_back(a.id);
    return out;
}

Status run_stage(VmStage& stage, engine::StageContext& ctx) {
    auto obs = stage.observe(ctx);
    if (!obs) return obs.error();
    auto plan = stage.plan(ctx, *obs);
    if (!plan) return plan.error();
    for (const auto& a : *plan) {
        if (auto s = stage.apply(ctx, a); !s) return s;
    }
    return stage.verify(ctx);
}

ino_t inode(const std::string& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_ino;
}

// The stage's plan for what it observes now.
std::vector<engine::Action> planned(VmStage& stage, engine::StageContext& ctx) {
    auto obs = stage.observe(ctx);
    REQUIRE(obs.ok());
    auto plan = stage.plan(ctx, *obs);
    REQUIRE(plan.ok());
    return *plan;
}

}  // namespace

TEST_CASE("the vm stage defines and starts each VM, then plans nothing", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    const auto plan = planned(stage, ctx);
    CHECK(ids(plan) == std::vector<std::string>{"define:kiln-gpu-01-vm0", "start:kiln-gpu-01-vm0",
                                                "define:kiln-gpu-01-vm1", "start:kiln-gpu-01-vm1",
                                                "ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1"});
    for (const auto& a : plan) REQUIRE(stage.apply(ctx, a).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(f.probes == 1);  // auto: probed once, answer kept
    CHECK(f.hv.count("define") == 2);
    CHECK(f.hv.count("start") == 2);
    const std::string vmdir = f.dir + "/vms/gpu-01";
    CHECK(fs::exists(vmdir + "/kiln-gpu-01-vm0.qcow2"));
    CHECK(fs::exists(vmdir + "/kiln-gpu-01-vm0-seed.iso"));
    const std::string xml = f.hv.domains.at("kiln-gpu-01-vm1").xml;
    CHECK(xml.find("type='qemu'") != std::string::npos);  // the probe said TCG
    CHECK(xml.find("hostfwd=tcp:127.0.0.1:29601-:29500") != std::string::npos);
    CHECK_FALSE(stamped_hash(xml).empty());

    CHECK(planned(stage, ctx).empty());
}

TEST_CASE("through the engine a node parks while its VMs boot and resumes at the VM it was on", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    f.hv.boot_output = "";  // the guests boot without their marker yet
    // KVM: both start at once (under TCG the second waits its turn, below).
    vm::mutable_vm_shape(f.fleet, "gpu")->accelerator = "kvm";
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    ctx.set_can_park(true);
    const auto plan = planned(stage, ctx);
    REQUIRE(plan.back().id == "ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1");
    for (size_t i = 0; i + 1 < plan.size(); ++i) REQUIRE(stage.apply(ctx, plan[i]).ok());

    // Neither is ready: the action parks on vm0, holding no thread.
    auto parked = stage.apply(ctx, plan.back());
    REQUIRE_FALSE(parked.ok());
    auto first = ctx.take_park();
    REQUIRE(first);
    CHECK(first->state["next"] == 0);
    CHECK(first->reason.find("kiln-gpu-01-vm0: booting") != std::string::npos);

    // vm0 writes its marker: the resume moves on and parks on vm1.
    f.hv.serial["kiln-gpu-01-vm0"] = "KILN_READY {\"fake\":true}\n";
    ctx.set_resumed(first->state);
    REQUIRE_FALSE(stage.apply(ctx, plan.back()).ok());
    auto second = ctx.take_park();
    REQUIRE(second);
    CHECK(second->state["next"] == 1);
    CHECK(second->reason.find("kiln-gpu-01-vm1: booting") != std::string::npos);

    // vm1 too: the action ends, nothing parked, and the stage verifies.
    f.hv.serial["kiln-gpu-01-vm1"] = "KILN_READY {\"fake\":true}\n";
    ctx.set_resumed(second->state);
    REQUIRE(stage.apply(ctx, plan.back()).ok());
    CHECK_FALSE(ctx.take_park());
    REQUIRE(stage.verify(ctx).ok());

    // A boot past boot_timeout ends the wait with the stage's not_ready.
    f.hv.serial["kiln-gpu-01-vm1"] = "";
    auto late = second->state;
    late["deadline_ms"] = 0;
    ctx.set_resumed(late);
    auto timed_out = stage.apply(ctx, plan.back());
    REQUIRE_FALSE(timed_out.ok());
    CHECK(timed_out.error().code == "vm.not_ready");
}

TEST_CASE("under TCG a VM starts once the one started before it on its hypervisor has booted, across nodes",
          "[vm][stage]") {
    StageFixture f("azure-ndv5");
    f.hv.boot_output = "";  // the guests boot without their marker yet
    VmStage stage = f.stage();
    auto one = f.ctx(0);
    auto two = f.ctx(1);
    std::vector<std::string> woken;
    for (auto* c : {&one, &two}) {
        c->set_can_park(true);
        c->set_wake([&woken](const std::string& key) { woken.push_back(key); });
    }
    const auto plan1 = planned(stage, one);
    REQUIRE(ids(plan1) == std::vector<std::string>{"define:kiln-gpu-01-vm0", "start:kiln-gpu-01-vm0",
                                                   "define:kiln-gpu-01-vm1", "start:kiln-gpu-01-vm1",
                                                   "ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1"});
    for (size_t i = 0; i < 3; ++i) REQUIRE(stage.apply(one, plan1[i]).ok());

    // gpu-01-vm0 boots: its sibling parks before starting, and so does the
    // other node's first VM.
    REQUIRE_FALSE(stage.apply(one, plan1[3]).ok());
    auto parked = one.take_park();
    REQUIRE(parked);
    CHECK(parked->reason ==
          "kiln-gpu-01-vm1 starts once kiln-gpu-01-vm0 has booted (TCG: one boot at a time on fake:///)");
    CHECK(parked->key == "vm.boot-turn:fake:///");
    const auto plan2 = planned(stage, two);
    REQUIRE(ids(plan2).at(1) == "start:kiln-gpu-02-vm0");
    REQUIRE(stage.apply(two, plan2[0]).ok());
    REQUIRE_FALSE(stage.apply(two, plan2[1]).ok());
    auto other = two.take_park();
    REQUIRE(other);
    CHECK(other->reason.find("kiln-gpu-02-vm0 starts once kiln-gpu-01-vm0 has booted") == 0);
    CHECK(f.hv.count("start") == 1);

    // Its marker: the sibling starts on resume, and the other node waits on.
    f.hv.serial["kiln-gpu-01-vm0"] = "KILN_READY {\"fake\":true}\n";
    one.set_resumed(parked->state);
    REQUIRE(stage.apply(one, plan1[3]).ok());
    CHECK(f.hv.calls.back() == "start kiln-gpu-01-vm1");
    two.set_resumed(other->state);
    REQUIRE_FALSE(stage.apply(two, plan2[1]).ok());
    other = two.take_park();
    REQUIRE(other);
    CHECK(other->reason.find("kiln-gpu-02-vm0 starts once kiln-gpu-01-vm1 has booted") == 0);

    // The ready action sees gpu-01-vm1 boot and wakes whoever waits its turn.
    f.hv.serial["kiln-gpu-01-vm1"] = "KILN_READY {\"fake\":true}\n";
    REQUIRE(stage.apply(one, plan1[4]).ok());
    CHECK(woken == std::vector<std::string>{"vm.boot-turn:fake:///", "vm.boot-turn:fake:///"});
    REQUIRE(stage.apply(two, plan2[1]).ok());
    CHECK(f.hv.calls.back() == "start kiln-gpu-02-vm0");

    // A VM ahead that stopped without its marker holds no one back.
    REQUIRE(stage.apply(two, plan2[2]).ok());
    REQUIRE_FALSE(stage.apply(two, plan2[3]).ok());
    CHECK(two.take_park()->reason.find("kiln-gpu-02-vm1 starts once kiln-gpu-02-vm0 has booted") == 0);
    REQUIRE(f.hv.stop("kiln-gpu-02-vm0").ok());
    REQUIRE(stage.apply(two, plan2[3]).ok());
    CHECK(f.hv.calls.back() == "start kiln-gpu-02-vm1");
}

TEST_CASE("under TCG without parking a start waits for the VM ahead, and a reimage takes its turn first",
          "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    REQUIRE(run_stage(stage, ctx).ok());
    f.hv.calls.clear();
    // vm0 comes back without its marker yet; it prints it a few looks later.
    f.hv.boot_output = "";
    REQUIRE(stage.apply(ctx, {"reimage:kiln-gpu-01-vm0", "reimage"}).ok());
    int looks = 0;
    f.hv.on_serial = [&](const std::string& name) {
        if (name == "kiln-gpu-01-vm0" && ++looks == 3) f.hv.serial[name] = "KILN_READY {\"fake\":true}\n";
    };
    REQUIRE(stage.apply(ctx, {"reimage:kiln-gpu-01-vm1", "reimage"}).ok());
    CHECK(looks >= 3);
    // vm1 was not stopped (nor given a new disk) before vm0 had booted.
    const std::vector<std::string> want{"stop kiln-gpu-01-vm0", "define kiln-gpu-01-vm0", "start kiln-gpu-01-vm0",
                                        "stop kiln-gpu-01-vm1", "define kiln-gpu-01-vm1", "start kiln-gpu-01-vm1"};
    CHECK(f.hv.calls == want);
}

TEST_CASE("the boot gate: the holder, an expired hold and a release", "[vm]") {
    BootGate gate;
    const auto now = BootGate::Clock::now();
    int asked = 0;
    const auto booting = [&asked](const std::string&) {
        ++asked;
        return true;
    };
    const auto booted = [&asked](const std::string&) {
        ++asked;
        return false;
    };
    CHECK(gate.take("qemu:///system", "a", 1, now + std::chrono::minutes(1), booting).empty());
    CHECK(gate.take("qemu:///system", "a", 1, now + std::chrono::minutes(1), booting).empty());  // its own
    // Not started yet, its domain reads as shut off: still a's turn.
    CHECK(gate.take("qemu:///system", "b", 1, now + std::chrono::minutes(1), booted) == "a");
    CHECK(asked == 0);
    gate.started("qemu:///system", "a");
    CHECK(gate.take("qemu:///system", "b", 1, now + std::chrono::minutes(1), booting) == "a");
    CHECK(asked == 1);
    CHECK(gate.take("qemu+ssh://h2/system", "c", 1, now + std::chrono::minutes(1), booting).empty());  // another host
    gate.release("qemu:///system", "b");  // not the holder: nothing changes
    CHECK(gate.take("qemu:///system", "b", 1, now + std::chrono::minutes(1), booting) == "a");
    gate.release("qemu:///system", "a");
    CHECK(gate.take("qemu:///system", "b", 1, now - std::chrono::seconds(1), booting).empty());
    gate.started("qemu:///system", "b");
    // b's hold has run past its boot_timeout: c takes it without asking.
    asked = 0;
    CHECK(gate.take("qemu:///system", "c", 1, now + std::chrono::minutes(1), booting).empty());
    CHECK(asked == 0);

    // Two at a time: a third waits for the one that waited longest.
    BootGate two;
    const auto later = now + std::chrono::minutes(1);
    CHECK(two.take("qemu:///system", "x", 2, later, booting).empty());
    CHECK(two.take("qemu:///system", "y", 2, later, booting).empty());
    CHECK(two.take("qemu:///system", "z", 2, later, booting) == "x");
    two.started("qemu:///system", "x");
    two.started("qemu:///system", "y");
    // y has booted (x still boots): z takes y's turn.
    CHECK(two.take("qemu:///system", "z", 2, later, [](const std::string& v) { return v == "x"; }).empty());
    CHECK(two.take("qemu:///system", "w", 2, later, booting) == "x");
}

TEST_CASE("smoke ports follow the fleet-wide VM ordinal", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx(1);
    REQUIRE(run_stage(stage, ctx).ok());
    // gpu-01 has 2 VMs before gpu-02's: ordinals 2 and 3.
    CHECK(f.hv.domains.at("kiln-gpu-02-vm0").xml.find("127.0.0.1:29602-:29500") != std::string::npos);
    CHECK(f.hv.domains.at("kiln-gpu-02-vm1").xml.find("127.0.0.1:29603-:29500") != std::string::npos);
}

TEST_CASE("the vm stage restarts a stopped VM, redefines a changed one and removes leftovers", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    REQUIRE(run_stage(stage, ctx).ok());
    f.hv.domains.at("kiln-gpu-01-vm0").state = DomainState::shutoff;
    f.hv.domains["kiln-gpu-01-vm7"] = {"<domain><name>kiln-gpu-01-vm7</name></domain>", DomainState::running};
    vm::mutable_vm_shape(f.fleet, "gpu")->vcpus = 8;  // a changed shape: both VMs change
    const auto plan = planned(stage, ctx);
    CHECK(ids(plan) == std::vector<std::string>{"undefine:kiln-gpu-01-vm7", "redefine:kiln-gpu-01-vm0",
                                                "start:kiln-gpu-01-vm0", "redefine:kiln-gpu-01-vm1",
                                                "start:kiln-gpu-01-vm1", "ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1"});
    for (const auto& a : plan) REQUIRE(stage.apply(ctx, a).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(f.hv.domains.count("kiln-gpu-01-vm7") == 0);
    CHECK(f.hv.domains.at("kiln-gpu-01-vm0").xml.find("<vcpu placement='static'>8</vcpu>") != std::string::npos);
}

TEST_CASE("reimage gives each VM a new overlay and keeps the domain", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    REQUIRE(run_stage(stage, ctx).ok());
    const std::string disk = f.dir + "/vms/gpu-01/kiln-gpu-01-vm0.qcow2";
    const ino_t before = inode(disk);
    const std::string uuid_line =
        f.hv.domains.at("kiln-gpu-01-vm0").xml.substr(f.hv.domains.at("kiln-gpu-01-vm0").xml.find("<uuid>"), 50);
    ctx.set_reimage(true);
    const auto plan = planned(stage, ctx);
    CHECK(ids(plan) == std::vector<std::string>{"reimage:kiln-gpu-01-vm0", "reimage:kiln-gpu-01-vm1",
                                                "ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1"});
    for (const auto& a : plan) REQUIRE(stage.apply(ctx, a).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(inode(disk) != before);
    CHECK(f.hv.domains.at("kiln-gpu-01-vm0").xml.find(uuid_line) != std::string::npos);
    CHECK(f.hv.count("undefine") == 0);
}

// A qcow2 overlay holds block references into its base, not a copy: on a
// rebuilt base it is a corrupt disk, so a changed base asks for a new overlay.
TEST_CASE("a rebuilt base image reimages the VMs on it, and a second plan is empty", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    const std::string base = f.dir + "/base.qcow2";
    auto write_manifest = [&](const std::string& sha) {
        std::ofstream(base + ".manifest.json") << "{\"image_sha256\": \"" << sha << "\"}";
    };
    write_manifest(std::string(64, 'a'));
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    REQUIRE(run_stage(stage, ctx).ok());
    CHECK(stamped_base(f.hv.domains.at("kiln-gpu-01-vm0").xml) == "sha256:" + std::string(64, 'a'));
    const std::string disk = f.dir + "/vms/gpu-01/kiln-gpu-01-vm0.qcow2";
    ino_t before = inode(disk);

    SECTION("the image stage's manifest names a new digest") {
        write_manifest(std::string(64, 'b'));
    }
    SECTION("an image kiln did not build is rewritten") {
        std::filesystem::remove(base + ".manifest.json");
        REQUIRE(run_stage(stage, ctx).ok());  // stamps the file identity first (a reimage)
        // Taken after that reimage: the inode it freed may be handed out again.
        before = inode(disk);
        ProcessRunner runner;
        auto r = runner.run({.argv = {"qemu-img", "create", "-q", "-f", "qcow2", base, "32M"}});
        REQUIRE(r.ok());
        REQUIRE(r->success());
    }
    const auto plan = planned(stage, ctx);
    CHECK(ids(plan) == std::vector<std::string>{"reimage:kiln-gpu-01-vm0", "reimage:kiln-gpu-01-vm1",
                                                "ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1"});
    CHECK(plan[0].description.find("base image changed") != std::string::npos);
    for (const auto& a : plan) REQUIRE(stage.apply(ctx, a).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(inode(disk) != before);
    CHECK(planned(stage, ctx).empty());
}

TEST_CASE("verify refuses a VM whose base image changed under it", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    REQUIRE(run_stage(stage, ctx).ok());
    std::ofstream(f.dir + "/base.qcow2.manifest.json") << "{\"image_sha256\": \"" << std::string(64, 'c') << "\"}";
    auto v = stage.verify(ctx);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().message.find("kiln-gpu-01-vm0") != std::string::npos);
}

TEST_CASE("a guest that never prints the marker fails the start, and verify says so", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    vm::mutable_vm_shape(f.fleet, "gpu")->boot_timeout = std::chrono::milliseconds(0);
    f.hv.boot_output = "Booting...\n";
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    auto s = run_stage(stage, ctx);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "vm.not_ready");
    CHECK(s.error().message.find("Booting...") != std::string::npos);
    auto v = stage.verify(ctx);
    REQUIRE_FALSE(v.ok());
}

TEST_CASE("bad host input fails with a clear error and defines nothing", "[vm][stage]") {
    SECTION("a GPU in an IOMMU group with an unrelated device") {
        StageFixture f("broken-shared-group", "whole");
        VmStage stage = f.stage();
        auto ctx = f.ctx();
        auto s = run_stage(stage, ctx);
        REQUIRE_FALSE(s.ok());
        CHECK(s.error().code == "vm.iommu_group");
        CHECK(s.error().message.find("fleet.toml:40:1: vm.gpu") == 0);
        CHECK(s.error().message.find("1022:7901") != std::string::npos);
        CHECK(f.hv.calls.empty());
    }
    SECTION("a missing sysfs file") {
        StageFixture f("azure-ndv5");
        test::FixtureCopy copy("azure-ndv5");
        fs::remove(copy.path("bus/pci/devices/0000:13:00.0/numa_node"));
        vm::mutable_vm_shape(f.fleet, "gpu")->sysfs = copy.root();
        VmStage stage = f.stage();
        auto ctx = f.ctx();
        auto s = run_stage(stage, ctx);
        REQUIRE_FALSE(s.ok());
        CHECK(s.error().code == "sysfs.missing");
        CHECK(s.error().message.find("vm.gpu.sysfs") != std::string::npos);
        CHECK(s.error().message.find("0000:13:00.0/numa_node") != std::string::npos);
        CHECK(f.hv.calls.empty());
    }
    SECTION("not enough hugepages") {
        StageFixture f("azure-ndv5");
        vm::mutable_vm_shape(f.fleet, "gpu")->memory_gib = 950;  // node 1 has 900 1G pages free
        VmStage stage = f.stage();
        auto ctx = f.ctx();
        auto s = run_stage(stage, ctx);
        REQUIRE_FALSE(s.ok());
        CHECK(s.error().code == "vm.resources");
        CHECK(s.error().message.find("900 free") != std::string::npos);
        CHECK(f.hv.calls.empty());
    }
    SECTION("no base image") {
        StageFixture f("azure-ndv5");
        vm::mutable_vm_shape(f.fleet, "gpu")->base_image = "";
        VmStage stage = f.stage();
        auto ctx = f.ctx();
        auto s = run_stage(stage, ctx);
        REQUIRE_FALSE(s.ok());
        CHECK(s.error().message.find("fleet.toml:40:1: vm.gpu.base_image") == 0);
        CHECK(f.hv.count("define") == 0);
    }
}

TEST_CASE("a running VM that has not printed its marker is waited for again, and only that", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    REQUIRE(run_stage(stage, ctx).ok());
    // As if kiln stopped while vm1 was still booting.
    f.hv.serial["kiln-gpu-01-vm1"] = "Booting Linux\n";
    const auto plan = planned(stage, ctx);
    CHECK(ids(plan) == std::vector<std::string>{"ready:kiln-gpu-01-vm1"});
    CHECK(stage.verify(ctx).error().message.find("kiln-gpu-01-vm1 is running but has not printed KILN_READY") == 0);
    f.hv.serial["kiln-gpu-01-vm1"] = "KILN_READY host=kiln-gpu-01-vm1\n";
    REQUIRE(stage.apply(ctx, plan.front()).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(f.hv.count("start") == 2);  // nothing restarted
}

TEST_CASE(
    "on a live host the vm stage clears ACS P2P redirect on the GPUDirect paths before defining VMs, and again "
    "after a reboot",
    "[vm][stage][acs]") {
    StageFixture f("hgx-a100");
    f.pci = std::make_shared<test::PciConfigFakeHost>();
    f.pci->load(test::fixture_root("hgx-a100"));
    const auto booted = f.pci->config;  // what the firmware sets at every boot
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    const auto plan = planned(stage, ctx);
    REQUIRE_FALSE(plan.empty());
    CHECK(plan.front().id == "host-acs:gpu-01");
    CHECK(plan.front().description.find("on 20 of 20 switch ports") != std::string::npos);
    CHECK(plan.front().description.find("0000:04:00.0 ACSCtl 0x001d -> 0x0011") != std::string::npos);
    CHECK(plan[1].id.rfind("define:", 0) == 0);
    CHECK(f.pci->writes.empty());  // observe and plan only read
    for (const auto& a : plan) REQUIRE(stage.apply(ctx, a).ok());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(f.pci->writes.size() == 20);
    CHECK(f.pci->acs_ctrl("0000:04:01.0") == 0x0011u);
    CHECK(f.pci->acs_ctrl("0000:02:00.0") == 0x001du);  // the top switch is off every path
    CHECK(planned(stage, ctx).empty());

    // A reboot: the firmware's value is back, the VMs still defined.
    f.pci->config = booted;
    CHECK_FALSE(stage.verify(ctx).ok());
    CHECK(ids(planned(stage, ctx)) == std::vector<std::string>{"host-acs:gpu-01"});
}

TEST_CASE("a live host without setpci fails the vm stage's observe by name", "[vm][stage][acs]") {
    StageFixture f("hgx-a100");
    f.pci = std::make_shared<test::PciConfigFakeHost>();
    f.pci->load(test::fixture_root("hgx-a100"));
    f.pci->has_setpci = false;
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    auto obs = stage.observe(ctx);
    REQUIRE_FALSE(obs.ok());
    CHECK(obs.error().code == "vm.setpci_missing");
}

TEST_CASE("on a remote connection readiness is read through the guest agent, never assumed", "[vm][stage]") {
    StageFixture f("azure-ndv5");
    f.hv.remote = true;     // the serial log is on the other host
    f.hv.boot_output = "";  // a guest that never writes its marker
    vm::mutable_vm_shape(f.fleet, "gpu")->boot_timeout = std::chrono::milliseconds(0);
    VmStage stage = f.stage();
    auto ctx = f.ctx();
    auto s = run_stage(stage, ctx);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "vm.not_ready");
    CHECK(s.error().message.find("/run/kiln-ready through the guest agent") != std::string::npos);
    auto v = stage.verify(ctx);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().message.find("guest agent") != std::string::npos);
    // Observed not ready: the plan waits for the VMs again.
    CHECK(ids(planned(stage, ctx)) == std::vector<std::string>{"ready:kiln-gpu-01-vm0,kiln-gpu-01-vm1"});

    // The guests write their marker: seen through the agent, the stage is done.
    for (const char* vm : {"kiln-gpu-01-vm0", "kiln-gpu-01-vm1"})
        f.hv.guest_files[vm][kReadyFile] = "KILN_READY {\"cloud_init\":\"done\"}\n";
    CHECK(planned(stage, ctx).empty());
    REQUIRE(stage.verify(ctx).ok());
    CHECK(f.hv.count("guest_file kiln-gpu-01-vm1 /run/kiln-ready") > 0);
}

TEST_CASE("a VM's host devices are the GPUs and functions its domain passes through, each in one VM", "[vm]") {
    // What fault localisation names beside a bad VM (pipelines/smoke): the
    // parts its domain really holds, on a captured Azure NDv5 host.
    StageFixture f("azure-ndv5");
    NodeVmPlanner planner;
    auto plan = planner.plan(f.fleet, f.fleet.nodes[0]);
    REQUIRE(plan.ok());
    REQUIRE(plan->vms.size() == 2);
    std::set<std::string> seen;
    size_t gpus = 0;
    for (const auto& v : plan->vms) {
        auto d = vm_host_devices(planner, f.fleet, f.fleet.nodes[0], v.name);
        REQUIRE(d.ok());
        CHECK_FALSE(d->gpus.empty());
        CHECK_FALSE(d->others.empty());  // the NICs given with the GPUs
        gpus += d->gpus.size();
        auto xml = plan->xml(static_cast<size_t>(v.index), Accelerator::tcg);
        REQUIRE(xml.ok());
        size_t hostdevs = 0;
        for (size_t at = xml->find("<hostdev"); at != std::string::npos; at = xml->find("<hostdev", at + 1)) ++hostdevs;
        CHECK(hostdevs == d->gpus.size() + d->others.size());
        for (const auto* list : {&d->gpus, &d->others})
            for (const auto& bdf : *list) {
                INFO(v.name << " " << bdf);
                CHECK(xml->find(bdf) != std::string::npos);
                CHECK(seen.insert(bdf).second);  // never in two VMs
                // Its guest address: for a GPU, the one the guest's NCCL
                // topology file gives it (what the guest's kernel shows).
                REQUIRE(d->guest.count(bdf) == 1);
                if (list == &d->gpus)
                    CHECK(v.nccl_topology.find("busid='" + d->guest.at(bdf) + "'") != std::string::npos);
            }
        CHECK(d->guest.size() == d->gpus.size() + d->others.size());
        std::set<std::string> guest_addresses;
        for (const auto& [host, guest] : d->guest) guest_addresses.insert(guest);
        CHECK(guest_addresses.size() == d->guest.size());  // one function each
    }
    CHECK(gpus == plan->host.gpus.size());  // every GPU of the host is in a VM
    auto none = vm_host_devices(planner, f.fleet, f.fleet.nodes[0], "kiln-gpu-01-vm9");
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == "vm.no_such_vm");
}

TEST_CASE(
    "a shape with a fabric bridge gives each VM the NIC, its RDMA forward and the ring's RDMA ports, and others are "
    "unchanged",
    "[vm]") {
    StageFixture f("azure-ndv5");
    NodeVmPlanner before_planner;
    auto before = before_planner.plan(f.fleet, f.fleet.nodes[1]);
    REQUIRE(before.ok());
    for (const auto& v : before->vms) {
        CHECK_FALSE(v.seed.smoke.contains("rdma"));
        for (const auto& p : v.seed.smoke["peers"]) CHECK_FALSE(p.contains("rdma_port"));
        CHECK(v.options.rdma_host_port == 0);
        CHECK(v.options.fabric_bridge.empty());
    }
    vm::mutable_vm_shape(f.fleet, "gpu")->fabric_bridge = "kilnfab0";
    vm::mutable_vm_shape(f.fleet, "gpu")->rdma_checks = true;
    NodeVmPlanner planner;
    auto plan = planner.plan(f.fleet, f.fleet.nodes[1]);
    REQUIRE(plan.ok());
    REQUIRE(plan->vms.size() == before->vms.size());
    for (size_t i = 0; i < plan->vms.size(); ++i) {
        const auto& v = plan->vms[i];
        INFO(v.name);
        // gpu-02's VMs come after gpu-01's in the fleet-wide ordinals.
        CHECK(v.ordinal == static_cast<int>(before->vms.size() + i));
        CHECK(v.options.rdma_host_port == kRdmaHostPortBase + v.ordinal);
        CHECK(v.seed.smoke["rdma"]["host_port"] == kRdmaHostPortBase + v.ordinal);
        CHECK(v.seed.smoke["rdma"]["guest_port"] == kGuestRdmaPort);
        for (const auto& p : v.seed.smoke["peers"])
            CHECK(p["rdma_port"] == kRdmaHostPortBase + p["ordinal"].get<int>());
        auto xml = plan->xml(i, Accelerator::tcg);
        REQUIRE(xml.ok());
        CHECK(xml->find("<source bridge='kilnfab0'/>") != std::string::npos);
        CHECK(xml->find(mac_from_name(v.name)) != std::string::npos);
        // The domain changed, so the VM is redefined.
        CHECK(v.desired_hash != before->vms[i].desired_hash);
    }
}
