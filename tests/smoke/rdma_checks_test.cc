// kiln-smoke's RDMA checks: the sysfs reading on a captured Soft-RoCE
// guest and a modelled GPU VM, perftest's table on captured output, and the
// all-to-all rounds across three kiln-smoke ranks with a stand-in perftest
// (tests/smoke/fake_ib_write_bw.py): every ordered pair written once, and a
// VM whose fabric link is down named by itself and by every peer.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/child_process.h"
#include "pipelines/smoke/rdma_checks.h"
#include "pipelines/smoke/stage/smoke_stage.h"
#include "tests/smoke/smoke_test_util.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace kiln::smoke;
using kiln::test::find_check;
using kiln::test::free_port_range;
using kiln::test::quick_args;
using kiln::test::TempDir;

namespace {

const std::string kFixtures = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/smoke";

}  // namespace

TEST_CASE("rdma: a captured Soft-RoCE guest's port is active, on eth1, with its link-local RoCE v2 GID") {
    std::string err;
    auto ports = rdma_ports(kFixtures + "/rdma-sysfs/rxe-guest", &err);
    REQUIRE(ports.size() == 1);
    CHECK(ports[0].device == "rxe0");
    CHECK(ports[0].port == 1);
    CHECK(ports[0].active());
    CHECK(ports[0].link_layer == "Ethernet");
    // Index 1 is the unused all-zero entry: never chosen.
    CHECK(ports[0].gid_index == 0);
    CHECK(ports[0].gid == "fe80:0000:0000:0000:5054:00ff:feaa:0001");
    CHECK(ports[0].netdev == "eth1");
    CHECK(ports[0].label() == "rxe0 port 1 (eth1)");
    // Soft-RoCE has no PCI function of its own: its NIC's (virtio) is named.
    CHECK(ports[0].pci == "0000:02:00.0");
    const Check c = rdma_ports_check(ports, err);
    CHECK(c.verdict != Verdict::Fail);
    CHECK(c.figure == 0);
}

TEST_CASE("rdma: on ConnectX VFs the IPv4-mapped RoCE v2 GID is chosen, and a down port is named") {
    std::string err;
    auto ports = rdma_ports(kFixtures + "/rdma-sysfs/mlx5-vm-model", &err);
    REQUIRE(ports.size() == 2);
    CHECK(ports[0].device == "mlx5_0");
    CHECK(ports[0].gid_index == 3);
    CHECK(ports[0].gid == "0000:0000:0000:0000:0000:ffff:0a01:0005");
    CHECK(ports[0].netdev == "ens6np0");
    CHECK(ports[1].device == "mlx5_1");
    CHECK(ports[1].state == "DOWN");
    // Each VF's own function, as the guest kernel numbers it.
    CHECK(ports[0].pci == "0000:f8:00.0");
    CHECK(ports[1].pci == "0000:f4:00.0");
    const Check c = rdma_ports_check(ports, err);
    CHECK(c.verdict == Verdict::Fail);
    CHECK(c.figure == 1);
    CHECK(c.detail == "mlx5_1 port 1 (ens7np0) is DOWN");
}

TEST_CASE("rdma: a VM without RDMA devices fails rdma_ports_down with the reason") {
    TempDir dir;
    std::string err;
    auto ports = rdma_ports(dir.path(), &err);
    CHECK(ports.empty());
    const Check c = rdma_ports_check(ports, err);
    CHECK(c.verdict == Verdict::Fail);
    CHECK(c.detail.find("class/infiniband does not exist") != std::string::npos);
}

TEST_CASE("rdma: a device link that does not resolve, or resolves outside PCI, names no PCI function") {
    TempDir dir;
    CHECK(pci_function_of(dir.path() + "/missing") == "");
    fs::create_directories(dir.path() + "/devices/platform/serial8250");
    fs::create_symlink(dir.path() + "/devices/platform/serial8250", dir.path() + "/link");
    CHECK(pci_function_of(dir.path() + "/link") == "");
    // The deepest PCI-shaped component wins: a function below a port.
    fs::create_directories(dir.path() + "/devices/pci0000:00/0000:00:1c.0/0000:3b:00.1/net/eth9");
    fs::create_symlink(dir.path() + "/devices/pci0000:00/0000:00:1c.0/0000:3b:00.1/net/eth9", dir.path() + "/nic");
    CHECK(pci_function_of(dir.path() + "/nic") == "0000:3b:00.1");
}

TEST_CASE("rdma: each rail's nearest GPU is the one behind the same switch, not the one of the same index") {
    std::string err;
    const std::string root = kFixtures + "/rdma-sysfs/mlx5-vm-model";
    auto ports = rdma_ports(root, &err);
    REQUIRE(ports.size() == 2);
    auto gpus = nvidia_gpus(root);
    REQUIRE(gpus.size() == 2);  // the NICs and bridges are not GPUs
    CHECK(gpus[0].address == "0000:f3:00.0");
    CHECK(gpus[1].address == "0000:f7:00.0");
    CHECK(nearest_gpu(ports[0], gpus) == "0000:f7:00.0");
    CHECK(nearest_gpu(ports[1], gpus) == "0000:f3:00.0");
    CHECK(nearest_gpu(ports[0], {}) == "");
    RdmaPort no_pci;
    CHECK(nearest_gpu(no_pci, gpus) == "");
}

namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
    std::string name;
    ScopedEnv(const std::string& n, const std::string& v) : name(n) { ::setenv(n.c_str(), v.c_str(), 1); }
    ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

// A GPU VM alone (it writes to itself, rail by rail) on the modelled
// ConnectX VFs, with the stand-in perftest.
struct GpuVmRun {
    TempDir dir;
    json evidence;
    std::vector<Check> checks;
    std::vector<std::string> log;

    void run(const std::string& gpu_memory) {
        const int port = free_port_range(1);
        REQUIRE(port > 0);
        ScopedEnv log_env("FAKE_RDMA_LOG", dir.path() + "/perftest.log");
        RdmaOptions o;
        o.perftest = std::string(KILN_SOURCE_DIR) + "/tests/smoke/fake_ib_write_bw.py";
        o.sysfs_root = kFixtures + "/rdma-sysfs/mlx5-vm-model";
        o.listen_port = port;
        o.gpu_memory = gpu_memory;
        o.per_run = std::chrono::seconds(20);
        checks = rdma_checks(nullptr, 0, {{"gpu-vm", "127.0.0.1", port}}, o,
                             std::chrono::steady_clock::now() + std::chrono::seconds(60), &evidence);
        std::istringstream in(kiln::test::read_file(dir.path() + "/perftest.log"));
        for (std::string l; std::getline(in, l);) log.push_back(l.substr(l.find(' ') + 1));  // less "server"/"client"
    }
    const Check& check(const std::string& name) const {
        for (const auto& c : checks)
            if (c.name == name) return c;
        FAIL("no check " << name);
        return checks.front();
    }
};

}  // namespace

TEST_CASE("rdma: with a CUDA perftest each rail writes from its nearest GPU's memory, both ends") {
    ScopedEnv cuda("FAKE_RDMA_CUDA", "1");
    GpuVmRun vm;
    vm.run("auto");
    REQUIRE_FALSE(vm.evidence.is_null());
    CHECK(vm.evidence["memory"] == "gpu");
    CHECK(vm.evidence["rails"][0]["gpu"] == "0000:f7:00.0");
    CHECK(vm.evidence["rails"][1]["gpu"] == "0000:f3:00.0");
    // Server and client of rail 0 then rail 1, each given its rail's GPU.
    REQUIRE(vm.log.size() == 4);
    CHECK(vm.log[0].find(" gpu 0000:f7:00.0") != std::string::npos);
    CHECK(vm.log[1].find(" gpu 0000:f7:00.0 ok") != std::string::npos);
    CHECK(vm.log[2].find(" gpu 0000:f3:00.0") != std::string::npos);
    CHECK(vm.log[3].find(" gpu 0000:f3:00.0 ok") != std::string::npos);
    const Check& bw = vm.check("rdma_write_bw_gbps");
    CHECK(bw.verdict == Verdict::Pass);
    CHECK(bw.detail.rfind("200 writes of 65536 B a pair, from GPU memory (GPUDirect RDMA: mlx5_0 from 0000:f7:00.0 "
                          "mlx5_1 from 0000:f3:00.0)",
                          0) == 0);
}

TEST_CASE("rdma: a perftest without CUDA writes from host memory and says so, and required GPU memory then fails") {
    SECTION("auto: host memory, named") {
        GpuVmRun vm;
        vm.run("auto");
        CHECK(vm.evidence["memory"] == "host");
        CHECK(vm.evidence["memory_note"].get<std::string>().find("built without CUDA") != std::string::npos);
        REQUIRE(vm.log.size() == 4);
        for (const auto& l : vm.log) CHECK(l.find(" gpu ") == std::string::npos);
        const Check& bw = vm.check("rdma_write_bw_gbps");
        CHECK(bw.verdict == Verdict::Pass);
        CHECK(bw.detail.rfind("200 writes of 65536 B a pair, from host memory (", 0) == 0);
    }
    SECTION("on: the bandwidth check fails with the reason") {
        GpuVmRun vm;
        vm.run("on");
        const Check& bw = vm.check("rdma_write_bw_gbps");
        CHECK(bw.verdict == Verdict::Fail);
        CHECK(bw.detail.find("GPU memory was asked for") != std::string::npos);
        CHECK(bw.detail.find("built without CUDA") != std::string::npos);
        // Reachability was still tested, rail by rail.
        CHECK(vm.check("rdma_unreachable_peers").verdict == Verdict::Pass);
    }
    SECTION("off: host memory even with a CUDA perftest") {
        ScopedEnv cuda("FAKE_RDMA_CUDA", "1");
        GpuVmRun vm;
        vm.run("off");
        CHECK(vm.evidence["memory"] == "host");
        CHECK(vm.evidence["memory_note"] == "--rdma-gpu-memory off");
        for (const auto& l : vm.log) CHECK(l.find(" gpu ") == std::string::npos);
    }
}

TEST_CASE("rdma: a pair's figure is never below what the client's own run proves it moved") {
    // 40 writes of 32 KiB: 1,310,720 bytes.
    PerftestFigure fig;
    fig.bytes = 32768;
    fig.iterations = 40;
    std::string note;
    // perftest's clock, off in a starved TCG guest, said 0.00 at every
    // precision; the client ran 5 s in all, setup included.
    CHECK(pair_write_gbs(fig, std::chrono::seconds(5), &note) == Approx(1310720.0 / 5 / 1e9));
    CHECK(note.find("perftest's clock said 0 GB/s") != std::string::npos);
    CHECK(note.find("moved at least 0.0002621") != std::string::npos);
    // Its figure above the bound, as on any sound clock: it stands as it is.
    fig.message_rate_mpps = 0.000031;  // 0.00813 Gb/s
    CHECK(pair_write_gbs(fig, std::chrono::seconds(5), &note) == Approx(0.000031 * 32768 * 8 / 1000.0 / 8.0));
    CHECK(note.empty());
    // A slow pair stays slow: 60 s for the writes is below a 0.0002 floor.
    fig.message_rate_mpps = 0;
    CHECK(pair_write_gbs(fig, std::chrono::seconds(60), &note) < 0.0002);
    // No time measured: perftest's figure, unbounded.
    CHECK(pair_write_gbs(fig, std::chrono::nanoseconds(0), &note) == 0);
}

TEST_CASE("rdma: perftest's table is read from both sides of a captured run and a failed client has none") {
    auto client = parse_perftest_bw(kiln::test::read_file(kFixtures + "/perftest/ib_write_bw-client-rxe.txt"));
    REQUIRE(client.has_value());
    CHECK(client->bytes == 65536);
    CHECK(client->iterations == 200);
    CHECK(client->peak_gbit == Approx(0.14));
    CHECK(client->average_gbit == Approx(0.14));
    // The message rate's six decimals give the finer figure: 0.000274 Mpps
    // of 64 KiB is 0.1436 Gb/s.
    CHECK(client->message_rate_mpps == Approx(0.000274));
    CHECK(client->average_gbit_precise() == Approx(0.000274 * 65536 * 8 / 1000.0));
    // A slow Soft-RoCE pair whose Gb/s columns round to 0.00 still has a figure.
    auto slow = parse_perftest_bw(
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 65536      200              0.00               0.00   \t\t   0.000015\n");
    REQUIRE(slow);
    CHECK(slow->average_gbit == 0);
    CHECK(slow->average_gbit_precise() == Approx(0.000015 * 65536 * 8 / 1000.0));
    CHECK(slow->average_gbit_precise() > 0.0016);  // above the cpu floor, 0.0002 GB/s
    auto server = parse_perftest_bw(kiln::test::read_file(kFixtures + "/perftest/ib_write_bw-server-rxe.txt"));
    REQUIRE(server.has_value());
    CHECK(server->bytes == 65536);
    CHECK_FALSE(
        parse_perftest_bw(kiln::test::read_file(kFixtures + "/perftest/ib_write_bw-client-no-server.txt")).has_value());
    CHECK_FALSE(parse_perftest_bw("").has_value());
    // A header with garbage under it is no figure.
    CHECK_FALSE(parse_perftest_bw(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]\n oops\n").has_value());
}

TEST_CASE("rdma: a child past its deadline is killed, with what it printed") {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_child({"/bin/sh", "-c", "echo started; exec sleep 30"}, t0 + std::chrono::milliseconds(500));
    CHECK(r.timed_out);
    CHECK(r.output.find("started") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    auto ok = run_child({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, t0 + std::chrono::seconds(20));
    CHECK_FALSE(ok.timed_out);
    CHECK(ok.exit_code == 3);
    CHECK(ok.output.find("out") != std::string::npos);
    CHECK(ok.output.find("err") != std::string::npos);
    auto missing = run_child({"/nonexistent/ib_write_bw"}, t0 + std::chrono::seconds(20));
    CHECK(missing.exit_code != 0);
}

namespace {

// Three kiln-smoke ranks on loopback, each with its own vm config (RDMA on,
// its perftest port), sysfs root and perftest.
struct RdmaRing {
    TempDir dir;
    int n = 3;
    int ring_base = 0;
    int rdma_base = 0;
    std::string log;

    RdmaRing() {
        ring_base = free_port_range(2 * n);
        REQUIRE(ring_base > 0);
        rdma_base = ring_base + n;
        log = dir.path() + "/perftest.log";
        const std::string fake = std::string(KILN_SOURCE_DIR) + "/tests/smoke/fake_ib_write_bw.py";
        fs::create_symlink(fake, dir.path() + "/ib_write_bw");
        fs::create_symlink(fake, dir.path() + "/ib_write_bw-down");
        fs::create_symlink(fake, dir.path() + "/ib_write_bw-deaf");
        json peers = json::array();
        for (int r = 0; r < n; ++r)
            peers.push_back({{"vm", "vm-" + std::to_string(r)},
                             {"address", "127.0.0.1"},
                             {"port", ring_base + r},
                             {"rdma_port", rdma_base + r}});
        for (int r = 0; r < n; ++r) {
            json cfg = {{"gpus", 0}, {"rdma", {{"guest_port", rdma_base + r}}}, {"peers", peers}};
            dir.write("vm" + std::to_string(r) + ".json", cfg.dump());
            fs::copy(kFixtures + "/rdma-sysfs/rxe-guest", dir.path() + "/sysfs" + std::to_string(r),
                     fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        }
    }

    void link_down(int r) {
        std::ofstream(dir.path() + "/sysfs" + std::to_string(r) + "/class/infiniband/rxe0/ports/1/state")
            << "1: DOWN\n";
    }

    // Rank `down` runs the perftest named ib_write_bw`variant`.
    std::vector<json> run(int down = -1, const std::string& variant = "-down") {
        std::vector<kiln::test::ChildResult> out(static_cast<size_t>(n));
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                std::vector<std::string> argv = {KILN_SMOKE_BINARY, "--rank", std::to_string(r), "--peers",
                                                 kiln::test::peers_list(ring_base, n)};
                for (const auto& a : quick_args()) argv.push_back(a);
                for (const auto& a : std::vector<std::string>{
                         "--vm-config", dir.path() + "/vm" + std::to_string(r) + ".json", "--rdma-timeout", "8",
                         "--test-rdma-sysfs", dir.path() + "/sysfs" + std::to_string(r), "--test-rdma-perftest",
                         dir.path() + (r == down ? "/ib_write_bw" + variant : "/ib_write_bw"), "--threshold",
                         "rdma_write_bw_gbps=0.5"})
                    argv.push_back(a);
                out[static_cast<size_t>(r)] = kiln::test::run_child(argv, {{"FAKE_RDMA_LOG", log}});
            });
        for (auto& t : threads) t.join();
        std::vector<json> docs;
        for (const auto& o : out) {
            INFO("stderr: " << o.err);
            auto j = json::parse(o.out, nullptr, false);
            REQUIRE_FALSE(j.is_discarded());
            docs.push_back(j);
        }
        return docs;
    }

    std::map<std::string, int> log_lines() const {
        std::map<std::string, int> count;
        std::istringstream in(kiln::test::read_file(log));
        std::string l;
        while (std::getline(in, l)) ++count[l];
        return count;
    }
};

}  // namespace

TEST_CASE("rdma: three ranks write to each other all to all, once per ordered pair, and report the slowest") {
    RdmaRing ring;
    auto docs = ring.run();
    for (int r = 0; r < 3; ++r) {
        INFO("rank " << r << ": " << docs[static_cast<size_t>(r)].dump());
        const json* down = find_check(docs[static_cast<size_t>(r)], "rdma_ports_down");
        const json* unreachable = find_check(docs[static_cast<size_t>(r)], "rdma_unreachable_peers");
        const json* bw = find_check(docs[static_cast<size_t>(r)], "rdma_write_bw_gbps");
        REQUIRE(down);
        REQUIRE(unreachable);
        REQUIRE(bw);
        CHECK((*down)["verdict"] == "pass");
        CHECK((*unreachable)["verdict"] == "pass");
        CHECK((*unreachable)["figure"] == 0);
        CHECK((*bw)["verdict"] == "pass");
        // The stand-in's 8 Gb/s, as GB/s (from its message rate, six decimals).
        CHECK((*bw)["figure"].get<double>() == Approx(1.0).epsilon(1e-3));
        // Both other members are named with their figures.
        const std::string detail = (*bw)["detail"];
        for (int p = 0; p < 3; ++p)
            if (p != r)
                CHECK(detail.find("vm-" + std::to_string(p) + " (rank " + std::to_string(p) + ")") !=
                      std::string::npos);
        CHECK(docs[static_cast<size_t>(r)]["verdict"] == "pass");
        // What the smoke stage judges the ring by.
        CHECK(docs[static_cast<size_t>(r)]["rdma"]["pairs"].size() == 2);
        CHECK(docs[static_cast<size_t>(r)]["rdma"]["unreachable"].empty());
        CHECK(docs[static_cast<size_t>(r)]["rdma"]["memory"] == "host");
        CHECK(docs[static_cast<size_t>(r)]["rdma"]["memory_note"] == "no NVIDIA GPU in this VM");
        // Its rail, with the PCI function the smoke stage traces to the host.
        CHECK(
            docs[static_cast<size_t>(r)]["rdma"]["rails"] ==
            json::parse(
                R"([{"rail":0,"device":"rxe0","port":1,"netdev":"eth1","pci":"0000:02:00.0","active":true,"gpu":""}])"));
    }
    // Each server served its two peers, each client run succeeded: 6 ordered
    // pairs, each once.
    auto lines = ring.log_lines();
    for (int r = 0; r < 3; ++r) {
        CHECK(lines["server " + std::to_string(ring.rdma_base + r)] == 2);
        CHECK(lines["client " + std::to_string(ring.rdma_base + r) + " ok"] == 2);
    }
}

TEST_CASE("rdma: a VM whose fabric link is down names its NIC, and every peer names that VM") {
    RdmaRing ring;
    ring.link_down(2);
    auto docs = ring.run(2);
    const json* own = find_check(docs[2], "rdma_ports_down");
    REQUIRE(own);
    CHECK((*own)["verdict"] == "fail");
    CHECK((*own)["detail"] == "rxe0 port 1 (eth1) is DOWN");
    CHECK(docs[2]["verdict"] == "fail");
    CHECK(docs[2]["rdma"]["ports_down"] == json::array({"rxe0 port 1 (eth1)"}));
    REQUIRE(docs[0]["rdma"]["unreachable"].size() == 1);
    CHECK(docs[0]["rdma"]["unreachable"][0]["vm"] == "vm-2");
    for (int r = 0; r < 2; ++r) {
        INFO("rank " << r << ": " << docs[static_cast<size_t>(r)].dump());
        const json* ports = find_check(docs[static_cast<size_t>(r)], "rdma_ports_down");
        const json* unreachable = find_check(docs[static_cast<size_t>(r)], "rdma_unreachable_peers");
        const json* bw = find_check(docs[static_cast<size_t>(r)], "rdma_write_bw_gbps");
        REQUIRE(ports);
        REQUIRE(unreachable);
        REQUIRE(bw);
        CHECK((*ports)["verdict"] == "pass");
        CHECK((*unreachable)["verdict"] == "fail");
        CHECK((*unreachable)["figure"] == 1);
        const std::string why = (*unreachable)["detail"];
        CHECK(why.find("vm-2 (rank 2) rail 0: rxe0 port 1 (eth1) -> rxe0 port 1 (eth1)") != std::string::npos);
        CHECK(why.find("its port is not active") != std::string::npos);
        CHECK(why.find("vm-" + std::to_string(1 - r) + " ") == std::string::npos);
        // The healthy pair's figure still stands.
        CHECK((*bw)["figure"].get<double>() == Approx(1.0).epsilon(1e-3));
    }
}

TEST_CASE("rdma: a VM whose perftest server never listens still ends its rounds and names its NIC") {
    // The lab's link-down VM: its Soft-RoCE port down kept perftest from
    // listening, and the RDMA part ran past its bound, so the VM reported
    // "did not return" instead of its NIC.
    RdmaRing ring;
    ring.link_down(2);
    auto docs = ring.run(2, "-deaf");
    const json* own = find_check(docs[2], "rdma_ports_down");
    REQUIRE(own);
    CHECK((*own)["verdict"] == "fail");
    CHECK((*own)["detail"] == "rxe0 port 1 (eth1) is DOWN");
    for (int r = 0; r < 2; ++r) {
        INFO("rank " << r << ": " << docs[static_cast<size_t>(r)].dump());
        const json* unreachable = find_check(docs[static_cast<size_t>(r)], "rdma_unreachable_peers");
        const json* bw = find_check(docs[static_cast<size_t>(r)], "rdma_write_bw_gbps");
        REQUIRE(unreachable);
        REQUIRE(bw);
        CHECK((*unreachable)["figure"] == 1);
        CHECK((*unreachable)["detail"].get<std::string>().find("vm-2 (rank 2) rail 0") != std::string::npos);
        CHECK((*bw)["verdict"] == "pass");
    }
    // Every rank's server was started once a round; the deaf one never served.
    auto lines = ring.log_lines();
    int served = 0;
    for (const auto& [line, count] : lines)
        if (line.rfind("server ", 0) == 0) served += count;
    CHECK(served == 4);  // ranks 0 and 1, two rounds each
}

TEST_CASE("rdma: a VM config without rdma runs no RDMA check and a peer without an RDMA port is named unreachable") {
    RdmaRing ring;
    // Rank 1's VM has no RDMA checks: its config lacks "rdma", and the
    // others' configs give it no rdma_port.
    json peers = json::array();
    for (int r = 0; r < 3; ++r) {
        json p = {{"vm", "vm-" + std::to_string(r)}, {"address", "127.0.0.1"}, {"port", ring.ring_base + r}};
        if (r != 1) p["rdma_port"] = ring.rdma_base + r;
        peers.push_back(p);
    }
    for (int r = 0; r < 3; ++r) {
        json cfg = {{"gpus", 0}, {"peers", peers}};
        if (r != 1) cfg["rdma"] = {{"guest_port", ring.rdma_base + r}};
        ring.dir.write("vm" + std::to_string(r) + ".json", cfg.dump());
    }
    auto docs = ring.run();
    CHECK(find_check(docs[1], "rdma_ports_down") == nullptr);
    CHECK(find_check(docs[1], "rdma_write_bw_gbps") == nullptr);
    for (int r : {0, 2}) {
        const json* unreachable = find_check(docs[static_cast<size_t>(r)], "rdma_unreachable_peers");
        REQUIRE(unreachable);
        CHECK((*unreachable)["verdict"] == "fail");
        CHECK((*unreachable)["detail"].get<std::string>().find("vm-1 (rank 1) rail 0: its VM has no RDMA checks") !=
              std::string::npos);
    }
}

namespace {

// A VM's smoke result as the smoke stage holds it: its RDMA checks and
// evidence, `down` when its own port is down, `missed` the VMs it could not
// write to.
json vm_result(const std::string& node, const std::string& vm, bool down, const std::vector<std::string>& missed) {
    json unreachable = json::array();
    for (const auto& m : missed) unreachable.push_back({{"vm", m}, {"rank", 0}, {"rail", 0}, {"why", "exited 1"}});
    json checks = json::array({
        {{"name", "rdma_ports_down"},
         {"figure", down ? 1 : 0},
         {"threshold", 0},
         {"compare", "<="},
         {"verdict", down ? "fail" : "pass"},
         {"detail", down ? "rxe_eth1 port 1 (eth1) is DOWN" : ""}},
        {{"name", "rdma_unreachable_peers"},
         {"figure", missed.size()},
         {"threshold", 0},
         {"compare", "<="},
         {"verdict", missed.empty() ? "pass" : "fail"},
         {"detail", "cannot RDMA-write to ..."}},
    });
    json ports_down = down ? json::array({"rxe_eth1 port 1 (eth1)"}) : json::array();
    return {{"node", node},
            {"vm", vm},
            {"report", {{"checks", checks}, {"rdma", {{"ports_down", ports_down}, {"unreachable", unreachable}}}}}};
}

json node_result(const json& ring, const std::string& node) {
    json vms = json::array();
    for (const auto& v : ring)
        if (v["node"] == node) vms.push_back(v);
    return {{"node", node}, {"vms", vms}};
}

std::vector<std::string> failed_names(const json& result) {
    std::vector<std::string> out;
    for (const auto& f : result["failed"])
        out.push_back(f["vm"].get<std::string>() + ":" + f["name"].get<std::string>());
    return out;
}

}  // namespace

TEST_CASE("rdma: a ring member whose only misses are a peer at fault warns and passes, and the peer fails") {
    SECTION("the peer's own port is down") {
        const json ring = json::array({vm_result("n1", "a", false, {"c"}), vm_result("n1", "b", false, {"c"}),
                                       vm_result("n2", "c", true, {"a", "b"})});
        json n1 = node_result(ring, "n1");
        judge_result(n1, {}, {}, ring);
        CHECK(n1["verdict"] == "pass");
        REQUIRE(n1["warnings"].size() == 2);
        CHECK(n1["warnings"][0]["detail"] ==
              "the fault is the peer's, not this VM's: c: its fabric port is down (rxe_eth1 port 1 (eth1))");
        json n2 = node_result(ring, "n2");
        judge_result(n2, {}, {}, ring);
        CHECK(failed_names(n2) == std::vector<std::string>{"c:rdma_ports_down", "c:rdma_unreachable_peers"});
    }
    SECTION("no other member reached the peer, though its port says active") {
        const json ring = json::array({vm_result("n1", "a", false, {"c"}), vm_result("n1", "b", false, {"c"}),
                                       vm_result("n2", "c", false, {"a", "b"})});
        json n1 = node_result(ring, "n1");
        judge_result(n1, {}, {}, ring);
        CHECK(n1["verdict"] == "pass");
        CHECK(n1["warnings"][1]["detail"].get<std::string>().find("c: none of the 2 other members reached it") !=
              std::string::npos);
        json n2 = node_result(ring, "n2");
        judge_result(n2, {}, {}, ring);
        CHECK(failed_names(n2) == std::vector<std::string>{"c:rdma_unreachable_peers"});
    }
    SECTION("two members that cannot reach each other: neither is cleared") {
        const json ring = json::array({vm_result("n1", "a", false, {"c"}), vm_result("n2", "c", false, {"a"})});
        json n1 = node_result(ring, "n1");
        judge_result(n1, {}, {}, ring);
        CHECK(failed_names(n1) == std::vector<std::string>{"a:rdma_unreachable_peers"});
        json n2 = node_result(ring, "n2");
        judge_result(n2, {}, {}, ring);
        CHECK(failed_names(n2) == std::vector<std::string>{"c:rdma_unreachable_peers"});
    }
    SECTION("a member that also misses a healthy peer keeps its failure") {
        const json ring = json::array({vm_result("n1", "a", false, {"b", "c"}), vm_result("n1", "b", false, {"c"}),
                                       vm_result("n2", "c", true, {"a", "b"})});
        json n1 = node_result(ring, "n1");
        judge_result(n1, {}, {}, ring);
        CHECK(failed_names(n1) == std::vector<std::string>{"a:rdma_unreachable_peers"});
    }
}

TEST_CASE("rdma: a failed RDMA check names the host NIC behind the rail, as the VM's plan traces it") {
    // VM c's rail 0 is down; the plan passes host 0000:4f:00.1 through at
    // the guest address the rail's device sits on.
    json ring = json::array({vm_result("n1", "a", false, {"c"}), vm_result("n1", "b", false, {"c"}),
                             vm_result("n2", "c", true, {"a", "b"})});
    for (auto& v : ring)
        v["report"]["rdma"]["rails"] = json::array(
            {{{"rail", 0}, {"device", "mlx5_1"}, {"port", 1}, {"pci", "0000:fe:00.1"}, {"active", v["vm"] != "c"}}});
    // A guest address the plan does not pass through (an emulated NIC) stays unnamed.
    trace_rails_to_host(ring[0], {{"0000:4e:00.1", "0000:fd:00.0"}});
    CHECK_FALSE(ring[0]["report"]["rdma"]["rails"][0].contains("host_pci"));
    trace_rails_to_host(ring[2], {{"0000:4e:00.1", "0000:fd:00.0"}, {"0000:4f:00.1", "0000:fe:00.1"}});
    CHECK(ring[2]["report"]["rdma"]["rails"][0]["host_pci"] == "0000:4f:00.1");

    json n2 = node_result(ring, "n2");
    judge_result(n2, {}, {}, ring);
    REQUIRE(failed_names(n2) == std::vector<std::string>{"c:rdma_ports_down", "c:rdma_unreachable_peers"});
    CHECK(n2["failed"][0]["detail"] == "rxe_eth1 port 1 (eth1) is DOWN; on the host, mlx5_1 is NIC 0000:4f:00.1");
    CHECK(n2["failed"][1]["detail"] == "cannot RDMA-write to ...; on the host, mlx5_1 is NIC 0000:4f:00.1");
    // The peers excused by c's fault say which NIC of c's it is.
    json n1 = node_result(ring, "n1");
    judge_result(n1, {}, {}, ring);
    CHECK(n1["verdict"] == "pass");
    REQUIRE(n1["warnings"].size() == 2);
    CHECK(n1["warnings"][0]["detail"] ==
          "the fault is the peer's, not this VM's: c: its fabric port is down (rxe_eth1 port 1 (eth1); on the host, "
          "mlx5_1 is NIC 0000:4f:00.1)");
}
