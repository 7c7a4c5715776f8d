// bench/vm: (1) time from apply to readiness for 1, 2 and 4 VMs on this
// machine (TCG, the cheap probe guest: the host kernel + kiln's initramfs,
// so the figure is kiln + libvirt + QEMU + a kernel boot, not a distro
// boot), split into kiln's own work (overlay, seed ISO, XML, define/start
// through the C API) against a baseline of `virsh define && virsh start`
// of the same XML in the same run; (2) domain XML + NCCL topology
// generation for the 8-GPU fixture hosts; (3) with --guest-image (a real
// guest such as gpu-guest-lite), that many guests (--guests, default 4)
// booted to their markers under TCG side by side against one after another,
// the vm stage's default under TCG (boot_gate.h, tcg_parallel_boots = 1),
// both beside --hogs busy processes (default 2). Writes JSON (--out).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/command.h"
#include "provisioner/vm/cloud_init_seed.h"
#include "provisioner/vm/domain_manager.h"
#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/libvirt_hypervisor.h"
#include "provisioner/vm/nccl_topo.h"
#include "provisioner/vm/overlay_disk.h"
#include "provisioner/vm/placement.h"
#include "provisioner/vm/probe_guest.h"

using namespace kiln;
using namespace kiln::vm;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "kiln-bench-vm: %s\n", what.c_str());
    std::exit(1);
}

struct Guest {
    std::string name;
    VmFiles files;
    std::string xml;
};

// A probe guest (kernel + initrd booted directly) or, with both empty, a
// distro guest booting from its disk.
std::string guest_xml(const std::string& name, const VmFiles& f, const std::string& kernel, const std::string& initrd,
                      uint64_t memory_mib = 256) {
    HostTopology host;
    NumaNode n0;
    n0.cpus = {0};
    host.nodes.push_back(n0);
    VmPlacement vm;
    vm.name = "bench";
    VmCell cell;
    cell.cpus = {0};
    cell.memory_kib = memory_mib * 1024;
    vm.cells.push_back(cell);
    DomainOptions o;
    o.name = name;
    o.accelerator = Accelerator::tcg;
    o.hugepages = false;
    o.pin = false;
    o.disk = f.overlay;
    o.seed_iso = f.seed_iso;
    o.serial_log = f.serial_log;
    o.net = NetBackend::slirp;
    if (!kernel.empty()) o.direct_boot = DirectBoot{kernel, initrd, "console=ttyS0 panic=-1 quiet"};
    auto x = domain_xml(host, vm, o);
    if (!x) die(x.error().str());
    return *x;
}

// A guest's overlay on `base` and its cloud-init seed, under `work`.
Guest guest_files(CommandRunner& runner, const std::string& work, const std::string& base, const std::string& name) {
    Guest g;
    g.name = name;
    g.files = vm_files(work, g.name);
    if (auto s = create_overlay(runner, base, g.files.overlay); !s) die(s.error().str());
    SeedConfig seed;
    seed.instance_id = g.name;
    seed.hostname = g.name;
    if (auto s = build_seed_iso(runner, seed, g.files.seed_iso); !s) die(s.error().str());
    return g;
}

void wait_all(DomainManager& dm, const std::vector<Guest>& guests) {
    ReadyWait w;
    w.timeout = std::chrono::minutes(5);
    w.poll = std::chrono::milliseconds(50);
    for (const auto& g : guests) {
        auto r = dm.wait_ready(g.name, w);
        if (!r) die(r.error().str());
    }
}

void teardown(DomainManager& dm, const std::string& prefix) {
    auto r = dm.teardown(prefix);
    if (!r) die(r.error().str());
}

// Busy processes for the whole of a measurement; killed on destruction.
struct Hogs {
    std::vector<pid_t> pids;
    explicit Hogs(int n) {
        for (int i = 0; i < n; ++i) {
            const pid_t p = ::fork();
            if (p == 0) {
                volatile unsigned long spin = 0;
                for (;;) spin = spin + 1;
            }
            if (p > 0) pids.push_back(p);
        }
    }
    ~Hogs() {
        for (pid_t p : pids) {
            ::kill(p, SIGKILL);
            ::waitpid(p, nullptr, 0);
        }
    }
};

// (3) Distro guests to their markers under TCG: all started at once, then
// one started only once the one before it has booted. Seconds for each.
json tcg_boot_order(DomainManager& dm, CommandRunner& runner, const std::string& work, const std::string& image, int n,
                    int hogs) {
    const std::string prefix = "kiln-bench-tcg" + std::to_string(::getpid()) + "-";
    const std::string base = work + "/guest-base.qcow2";
    fs::copy_file(image, base, fs::copy_options::overwrite_existing);  // QEMU cannot read under /root
    ::chmod(base.c_str(), 0644);
    auto make = [&](const std::string& tag) {
        std::vector<Guest> guests;
        for (int i = 0; i < n; ++i) {
            Guest g = guest_files(runner, work, base, prefix + tag + std::to_string(i));
            g.xml = guest_xml(g.name, g.files, "", "", 1024);
            if (auto s = dm.define(g.xml); !s) die(s.error().str());
            guests.push_back(g);
        }
        return guests;
    };
    ReadyWait w;
    w.timeout = std::chrono::minutes(60);
    w.poll = std::chrono::milliseconds(500);
    Hogs busy(hogs);
    // One after another first: a machine still warm from the other pass
    // would favour whichever comes second.
    auto one = make("o");
    const auto t0 = Clock::now();
    for (const auto& g : one) {
        if (auto s = dm.start(g.name); !s) die(s.error().str());
        if (auto r = dm.wait_ready(g.name, w); !r) die(r.error().str());
    }
    const double one_s = ms_since(t0) / 1000;
    teardown(dm, prefix);
    auto side = make("s");
    const auto t1 = Clock::now();
    for (const auto& g : side)
        if (auto s = dm.start(g.name); !s) die(s.error().str());
    for (const auto& g : side)
        if (auto r = dm.wait_ready(g.name, w); !r) die(r.error().str());
    const double side_s = ms_since(t1) / 1000;
    teardown(dm, prefix);
    std::printf("tcg boots of %d guests beside %d busy processes: one after another %.0f s, side by side %.0f s\n", n,
                hogs, one_s, side_s);
    return {{"guest_image", image},     {"guests", n},
            {"busy_processes", hogs},   {"one_after_another_s", one_s},
            {"side_by_side_s", side_s}, {"ratio_side_by_side_over_one_after_another", side_s / one_s}};
}

}  // namespace

int main(int argc, char** argv) {
    std::string out = "bench/results/vm.json";
    std::string work = "build/bench-vm";
    std::string init = "build/kiln-probe-init";
    std::string fixtures = "tests/fixtures/sysfs";
    std::string guest_image;
    int guests = 4;
    int hogs = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--out")
            out = argv[i + 1];
        else if (k == "--work")
            work = argv[i + 1];
        else if (k == "--init")
            init = argv[i + 1];
        else if (k == "--fixtures")
            fixtures = argv[i + 1];
        else if (k == "--guest-image")
            guest_image = argv[i + 1];
        else if (k == "--guests")
            guests = std::max(1, std::atoi(argv[i + 1]));
        else if (k == "--hogs")
            hogs = std::max(0, std::atoi(argv[i + 1]));
    }
    fs::create_directories(work);
    work = fs::absolute(work).string();
    ::chmod(work.c_str(), 0755);
    json result = {{"bench", "vm"}, {"machine_cpus", std::thread::hardware_concurrency()}};

    // (2) XML generation for the 8-GPU fixture hosts.
    json gen = json::array();
    for (const char* host_name : {"azure-ndv4", "azure-ndv5", "aws-p4d"}) {
        const int iters = 200;
        auto host = discover_host({fixtures + "/" + host_name});
        if (!host) die(host.error().str());
        const auto t_disc = Clock::now();
        for (int i = 0; i < iters; ++i) (void)discover_host({fixtures + "/" + host_name});
        const double disc_ms = ms_since(t_disc) / iters;
        PlacementRequest req;
        auto p = place(*host, req);
        if (!p) die(p.error().str());
        const auto t0 = Clock::now();
        size_t bytes = 0;
        for (int i = 0; i < iters; ++i) {
            auto pl = place(*host, req);
            DomainOptions o = domain_options(*pl, "kiln-bench-vm0");
            auto x = domain_xml(*host, pl->vms[0], o);
            auto t = nccl_topology(*host, pl->vms[0]);
            bytes = x->size() + t->size();
        }
        const double gen_ms = ms_since(t0) / iters;
        gen.push_back({{"host", host_name},
                       {"gpus", host->gpus.size()},
                       {"iterations", iters},
                       {"discover_ms", disc_ms},
                       {"place_xml_nccl_ms", gen_ms},
                       {"bytes", bytes}});
        std::printf("xml %-11s discover %.3f ms, place+xml+nccl %.3f ms\n", host_name, disc_ms, gen_ms);
    }
    result["xml_generation"] = gen;

    // (1) apply to readiness.
    auto kernel = find_host_kernel();
    if (!kernel) die(kernel.error().str());
    const std::string initrd = work + "/initrd.img";
    if (auto s = write_probe_initramfs(init, initrd); !s) die(s.error().str());
    const std::string base = work + "/base.qcow2";
    ProcessRunner runner;
    auto mk = runner.run({.argv = {"qemu-img", "create", "-q", "-f", "qcow2", base, "64M"}});
    if (!mk || !mk->success()) die("qemu-img create failed");
    auto hvr = LibvirtHypervisor::open("");
    if (!hvr) die(hvr.error().str());
    DomainManager dm(**hvr, runner);
    const std::string prefix = "kiln-bench-vm" + std::to_string(::getpid()) + "-";
    json boots = json::array();
    for (int n : {1, 2, 4}) {
        // kiln: files, XML, define and start through the C API, then readiness.
        std::vector<Guest> guests;
        const auto t0 = Clock::now();
        for (int i = 0; i < n; ++i) {
            Guest g = guest_files(runner, work, base, prefix + "k" + std::to_string(n) + "-" + std::to_string(i));
            g.xml = guest_xml(g.name, g.files, *kernel, initrd);
            guests.push_back(g);
        }
        const double prepare_ms = ms_since(t0);
        const auto t1 = Clock::now();
        for (const auto& g : guests) {
            if (auto s = dm.define(g.xml); !s) die(s.error().str());
            if (auto s = dm.start(g.name); !s) die(s.error().str());
        }
        const double start_ms = ms_since(t1);
        wait_all(dm, guests);
        const double kiln_total = ms_since(t0);
        teardown(dm, prefix);

        // Baseline: the same XML (files already made) through virsh.
        std::vector<Guest> base_guests;
        for (int i = 0; i < n; ++i) {
            Guest g;
            g.name = prefix + "v" + std::to_string(n) + "-" + std::to_string(i);
            g.files = vm_files(work, g.name);
            if (auto s = create_overlay(runner, base, g.files.overlay); !s) die(s.error().str());
            fs::copy_file(guests[static_cast<size_t>(i)].files.seed_iso, g.files.seed_iso,
                          fs::copy_options::overwrite_existing);
            g.xml = guest_xml(g.name, g.files, *kernel, initrd);
            std::ofstream(work + "/" + g.name + ".xml") << g.xml;
            base_guests.push_back(g);
        }
        const auto b0 = Clock::now();
        for (const auto& g : base_guests) {
            auto d =
                runner.run({.argv = {"virsh", "-q", "-c", "qemu:///system", "define", work + "/" + g.name + ".xml"}});
            if (!d || !d->success()) die("virsh define failed: " + (d ? d->err : d.error().message));
            auto s = runner.run({.argv = {"virsh", "-q", "-c", "qemu:///system", "start", g.name}});
            if (!s || !s->success()) die("virsh start failed: " + (s ? s->err : s.error().message));
        }
        const double virsh_start_ms = ms_since(b0);
        wait_all(dm, base_guests);
        const double baseline_total = ms_since(b0);
        teardown(dm, prefix);

        boots.push_back({{"vms", n},
                         {"kiln_apply_to_ready_ms", kiln_total},
                         {"kiln_prepare_files_xml_ms", prepare_ms},
                         {"kiln_define_start_ms", start_ms},
                         {"baseline_virsh_define_start_to_ready_ms", baseline_total},
                         {"baseline_virsh_define_start_ms", virsh_start_ms},
                         {"kiln_overhead_ms", kiln_total - baseline_total},
                         {"ratio_kiln_over_baseline", kiln_total / baseline_total}});
        std::printf(
            "boot %d VM(s): kiln %.0f ms (files+xml %.0f, define+start %.0f), virsh baseline %.0f ms (define+start "
            "%.0f)\n",
            n, kiln_total, prepare_ms, start_ms, baseline_total, virsh_start_ms);
    }
    result["apply_to_ready"] = boots;
    if (!guest_image.empty()) result["tcg_boot_order"] = tcg_boot_order(dm, runner, work, guest_image, guests, hogs);
    result["guest"] = "probe guest: host kernel " + *kernel + " + kiln-probe-init initramfs, TCG, 1 vCPU, 256 MiB";
    result["accelerator"] = "tcg";
    fs::create_directories(fs::path(out).parent_path());
    std::ofstream(out) << result.dump(2) << "\n";
    std::printf("wrote %s\n", out.c_str());
    return 0;
}
