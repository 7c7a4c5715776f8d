// kiln-smoke: the smoke job that runs inside every guest. It prints ONE JSON
// document on stdout: {"host","backend","checks":[...],"verdict"}; exit 0
// when every check passed or was skipped, 1 when one failed, 2 on bad usage.
// Every check runs under a watchdog: nothing here waits without a bound.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipelines/smoke/check_json.h"
#include "pipelines/smoke/cpu_checks.h"
#include "pipelines/smoke/gpu_health.h"
#include "pipelines/smoke/rdma_checks.h"
#include "pipelines/smoke/ring_allreduce.h"
#include "pipelines/smoke/tcp_ring.h"
#include "pipelines/smoke/thresholds.h"
#include "pipelines/smoke/watchdog.h"
#ifdef KILN_SMOKE_WITH_CUDA
#include "pipelines/smoke/gpu_checks.h"
#endif
#include "pipelines/smoke/default_floors.h"  // generated: kDefaultFloors, floors.json's text
#include "provisioner/vm/guest_contract.h"   // kGuestSmokeConfigPath

namespace {

using namespace kiln::smoke;
using Clock = std::chrono::steady_clock;

bool read_text(const std::string& path, std::string* out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream s;
    s << in.rdbuf();
    *out = s.str();
    return true;
}

int usage_error(const std::string& m) {
    std::fprintf(stderr, "kiln-smoke: %s\n", m.c_str());
    return 2;
}

// How many GPUs the VM was given: the "gpus" member of the vm stage's
// config. 0 when the file is absent (not a kiln VM) and `required` is false.
bool expected_gpus(const std::string& path, bool required, int* out, std::string* err) {
    std::string text;
    *out = 0;
    if (!read_text(path, &text)) {
        if (required) *err = "cannot read --vm-config " + path;
        return !required;
    }
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        *err = path + ": not a JSON object";
        return false;
    }
    if (!j.contains("gpus")) return true;
    if (!j["gpus"].is_number_integer() || j["gpus"].get<int>() < 0) {
        *err = path + ": \"gpus\" must be a count";
        return false;
    }
    *out = j["gpus"].get<int>();
    return true;
}

// The RDMA checks' view of the ring, from the vm stage's config: on when
// it has "rdma" for this VM; each --peers endpoint's VM and perftest port
// from its "peers" (port 0 where that VM has no RDMA checks).
// `in_ring`: whether any member of the ring has RDMA checks (the vm stage
// gives every VM the same fleet-wide peers), so that a VM without them
// still keeps step with the others' rounds.
bool rdma_config(const std::string& path, const std::vector<Endpoint>& ring, bool* enabled, bool* in_ring,
                 int* listen_port, std::vector<RdmaPeer>* peers, std::string* err) {
    *enabled = false;
    *in_ring = false;
    std::string text;
    if (!read_text(path, &text)) return true;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        *err = path + ": not a JSON object";
        return false;
    }
    const nlohmann::json known = j.value("peers", nlohmann::json::array());
    for (const auto& e : ring) {
        RdmaPeer p{e.host + ":" + std::to_string(e.port), e.host, 0};
        for (const auto& k : known) {
            if (!k.is_object() || k.value("address", "") != e.host || k.value("port", -1) != e.port) continue;
            p.name = k.value("vm", p.name);
            p.port = k.value("rdma_port", 0);
        }
        if (p.port > 0) *in_ring = true;
        peers->push_back(p);
    }
    if (!j.contains("rdma")) return true;
    if (!j["rdma"].is_object() || !j["rdma"].value("guest_port", nlohmann::json(0)).is_number_integer()) {
        *err = path + ": \"rdma\" must be an object with a \"guest_port\"";
        return false;
    }
    *enabled = true;
    *in_ring = true;
    *listen_port = j["rdma"].value("guest_port", 18515);
    return true;
}

std::string hostname() {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln-smoke: health checks, all-reduce and a short training run; one JSON document on stdout"};
    int rank = 0;
    std::string peers_text, listen_addr = "0.0.0.0", backend = "auto", profile, floors_file, config_file, host;
    std::string vm_config = kiln::vm::kGuestSmokeConfigPath;
    int expect_gpus = -1;
    int listen_port = 0;
    std::vector<std::string> overrides;
    double check_timeout_s = 120, connect_timeout_s = 60;
    size_t allreduce_bytes = 4u << 20, mem_bytes = 64u << 20;
    int iterations = 5, steps = 300, gemm_n = 256, gemm_slowdown = 1;
    bool ring_only = false;
    RankFault fault;
    int step_delay_ms = 0;
    Repeat repeat;
    unsigned seed = 1234;
    app.add_option("--rank", rank, "this rank (0-based)");
    app.add_option("--peers", peers_text, "every rank's host:port, in rank order (default: one rank, no peers)");
    app.add_option("--listen-addr", listen_addr, "address to accept the previous rank on")->capture_default_str();
    app.add_option("--listen-port", listen_port, "port to listen on (default: this rank's port in --peers)");
    app.add_option("--backend", backend, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    app.add_option("--profile", profile, "floors profile (cpu, A100, H100, H200; default: by backend and GPU model)");
    app.add_option("--floors", floors_file, "floors data file instead of the built-in one");
    app.add_option("--config", config_file, R"(JSON {"profile": P, "thresholds": {CHECK: number}} from kiln)");
    auto* vm_config_opt = app.add_option("--vm-config", vm_config,
                                         "the VM's config from kiln's vm stage; its \"gpus\" is how many GPUs "
                                         "the VM was given (absent at the default path: not known)")
                              ->capture_default_str();
    app.add_option("--expect-gpus", expect_gpus, "GPUs the VM was given (instead of --vm-config's)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--threshold", overrides, "CHECK=VALUE, overriding the floors (repeatable)");
    app.add_option("--check-timeout", check_timeout_s, "seconds each check may take")->capture_default_str();
    app.add_option("--connect-timeout", connect_timeout_s, "seconds to wait for the peers")->capture_default_str();
    app.add_option("--allreduce-bytes", allreduce_bytes, "bytes per all-reduce")->capture_default_str();
    app.add_option("--iterations", iterations, "timed all-reduce iterations")->capture_default_str();
    app.add_option("--mem-bytes", mem_bytes, "bytes copied by the memory bandwidth check")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_option("--gemm-n", gemm_n, "CPU GEMM size")->capture_default_str()->check(CLI::Range(1, 8192));
    app.add_option("--min-seconds", repeat.min_seconds,
                   "the CPU speed checks repeat their work until this long has run (and 3 times at least); "
                   "the best repetition is the figure")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    // A test hook, not for users (hidden): a GEMM this many times slower.
    app.add_option("--test-gemm-slowdown", gemm_slowdown)->group("")->check(CLI::Range(1, 1000));
    // A test hook, not for users (hidden): this rank adds wrong values to
    // what it contributes, as a rank behind a link that flips bits would.
    app.add_flag("--test-corrupt-allreduce", fault.corrupt)->group("");
    // Likewise: a rank whose links go down, or whose link is slow.
    app.add_flag("--test-drop-allreduce", fault.drop)->group("");
    app.add_option("--test-allreduce-step-delay-ms", step_delay_ms)->group("")->check(CLI::Range(0, 60000));
    app.add_flag("--ring-only", ring_only,
                 "run only the all-reduce checks (kiln's fault localisation re-runs sub-rings with this)");
    RdmaOptions rdma;
    double rdma_timeout_s = 30;
    app.add_option("--rdma-bytes", rdma.bytes,
                   "bytes per RDMA write in the RDMA checks (when the VM config asks for them)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 30));
    app.add_option("--rdma-iterations", rdma.iterations, "RDMA writes per pair")
        ->capture_default_str()
        ->check(CLI::Range(5, 1000000));
    app.add_option(
           "--rdma-qp-timeout", rdma.qp_timeout,
           "perftest -u: the RDMA transport timeout, 4.096 us * 2^N per retry (18: about 1 s, as NCCL_IB_TIMEOUT)")
        ->capture_default_str()
        ->check(CLI::Range(1, 31));
    app.add_option("--rdma-gpu-memory", rdma.gpu_memory,
                   "where the RDMA writes come from: auto (each rail's nearest GPU where the VM has GPUs and "
                   "perftest was built with CUDA, else host memory), on (GPU memory, or rdma_write_bw_gbps fails), "
                   "off (host memory)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "on", "off"}));
    app.add_option("--rdma-timeout", rdma_timeout_s, "seconds one pair's RDMA write test may take")
        ->capture_default_str()
        ->check(CLI::Range(1.0, 3600.0));
    // Test hooks, not for users (hidden): another perftest program, another
    // sysfs root for the RDMA devices.
    app.add_option("--test-rdma-perftest", rdma.perftest)->group("");
    app.add_option("--test-rdma-sysfs", rdma.sysfs_root)->group("");
    app.add_option("--steps", steps, "training steps")->capture_default_str();
    app.add_option("--seed", seed, "training seed")->capture_default_str();
    app.add_option("--host", host, "name to report (default: the host name)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }

    std::vector<Endpoint> peers;
    std::string err;
    if (peers_text.empty())
        peers.push_back({"127.0.0.1", 0});
    else if (!parse_peers(peers_text, &peers, &err))
        return usage_error(err);
    if (rank < 0 || rank >= static_cast<int>(peers.size()))
        return usage_error("--rank " + std::to_string(rank) + " is not in 0.." + std::to_string(peers.size() - 1));

    Thresholds thresholds;
    std::string floors_text = kDefaultFloors;
    if (!floors_file.empty() && !read_text(floors_file, &floors_text))
        return usage_error("cannot read --floors " + floors_file);
    if (!thresholds.load_floors(floors_text, &err)) return usage_error(err);

    if (expect_gpus < 0 && !expected_gpus(vm_config, vm_config_opt->count() > 0, &expect_gpus, &err))
        return usage_error(err);
    bool rdma_enabled = false, rdma_in_ring = false;
    std::vector<RdmaPeer> rdma_peers;
    if (!rdma_config(vm_config, peers, &rdma_enabled, &rdma_in_ring, &rdma.listen_port, &rdma_peers, &err))
        return usage_error(err);
    rdma.passive = !rdma_enabled;
    rdma.per_run = std::chrono::milliseconds(static_cast<long long>(rdma_timeout_s * 1000));

    Report report;
    report.host = host.empty() ? hostname() : host;
    report.rank = rank;
    report.ranks = static_cast<int>(peers.size());
    const auto bound = std::chrono::milliseconds(static_cast<long long>(check_timeout_s * 1000));
    const auto connect_bound = std::chrono::milliseconds(static_cast<long long>(connect_timeout_s * 1000));

#ifdef KILN_SMOKE_WITH_CUDA
    GpuInventory inventory;
    if (backend != "cpu") {
        auto inv = run_bounded({"gpu_count"}, bound, [&] {
            inventory = gpu_inventory();
            return std::vector<Check>{};
        });
        if (!inv.empty()) inventory.error = inv[0].detail;  // the inventory itself hung
    }
    const bool use_cuda = backend == "cuda" || (backend == "auto" && inventory.count > 0);
#else
    if (backend == "cuda") return usage_error("--backend cuda: this kiln-smoke was built without CUDA and NCCL");
    const bool use_cuda = false;
#endif
    report.backend = use_cuda ? "cuda" : "cpu";

    std::string selected = profile;
#ifdef KILN_SMOKE_WITH_CUDA
    if (selected.empty() && use_cuda) selected = inventory.model.empty() ? "H200" : inventory.model;
#endif
    if (selected.empty()) selected = "cpu";
    if (!thresholds.select(selected, &err)) return usage_error(err);
    if (!config_file.empty()) {
        std::string text;
        if (!read_text(config_file, &text)) return usage_error("cannot read --config " + config_file);
        if (!thresholds.load_config(text, &err)) return usage_error(err);
    }
    for (const auto& o : overrides)
        if (!thresholds.set_override(o, &err)) return usage_error(err);

    auto add = [&](std::vector<Check> checks) {
        for (auto& c : checks) report.checks.push_back(std::move(c));
    };

    // The ring first: its peers are starting now too.
    std::shared_ptr<TcpRing> ring;
    std::string ring_error;
    if (peers.size() > 1) {
        auto deadline = Clock::now() + connect_bound;
        auto got = run_bounded({"ring_connect"}, connect_bound + std::chrono::seconds(5), [&] {
            std::string e;
            auto r = TcpRing::connect(rank, peers, listen_addr, listen_port, deadline, &e);
            if (!r) throw std::runtime_error(e);
            ring = std::move(r);
            return std::vector<Check>{};
        });
        if (!got.empty()) ring_error = got[0].detail;
    }

    if (use_cuda) {
#ifdef KILN_SMOKE_WITH_CUDA
        add({gpu_count_check(inventory.count, expect_gpus, inventory.model, inventory.error)});
        if (inventory.count > 0) {
            GpuOptions go;
            go.iterations = iterations;
            go.train_steps = steps;
            go.seed = seed;
            for (auto& step : gpu_check_steps(go, ring.get(), Clock::now() + bound)) {
                const bool ring_step = std::any_of(step.names.begin(), step.names.end(), [](const std::string& n) {
                    return n.find("allreduce") != std::string::npos;
                });
                if (ring_only && !ring_step) continue;
                add(run_bounded(step.names, bound, step.run));
            }
            // The NVML step's read, when it finished (a hung one leaves null).
            {
                std::lock_guard<std::mutex> lock(go.nvml_state->mu);
                report.nvml = go.nvml_state->value;
            }
        }
#endif
    } else {
        // A VM given GPUs that this run cannot use fails, whatever the CPU
        // checks say: a CPU pass would hide the missing GPUs.
        if (expect_gpus > 0) {
#ifdef KILN_SMOKE_WITH_CUDA
            const std::string why = backend == "cpu" ? "--backend cpu" : inventory.error;
#else
            const std::string why = "this kiln-smoke was built without CUDA and NCCL";
#endif
            add({gpu_count_check(0, expect_gpus, "", why)});
        }
        if (!ring_only) {
            add(run_bounded({"mem_bandwidth_gbps"}, bound,
                            [&] { return std::vector<Check>{memory_bandwidth_check(mem_bytes, repeat)}; }));
            add(run_bounded({"cpu_gemm_gflops"}, bound,
                            [&] { return std::vector<Check>{cpu_gemm_check(gemm_n, repeat, gemm_slowdown)}; }));
            add(run_bounded({"loss_drop_fraction"}, bound,
                            [&] { return std::vector<Check>{cpu_training_check(seed, steps)}; }));
        }
        if (peers.size() > 1 && !ring) {
            for (const char* name : {"allreduce_errors", "allreduce_busbw_gbps"}) {
                Check c{name, 0, std::nullopt, name == std::string("allreduce_errors") ? "elements" : "GB/s",
                        name == std::string("allreduce_errors") ? "<=" : ">="};
                c.verdict = Verdict::Fail;
                c.detail = "ring bootstrap failed: " + ring_error;
                report.checks.push_back(c);
            }
        } else {
            // A stalled peer mid-transfer: the exchange deadline fires first,
            // the watchdog after it if anything else hangs.
            add(run_bounded({"allreduce_errors", "allreduce_busbw_gbps"}, bound + std::chrono::seconds(5), [&] {
                if (!ring) {
                    std::string e;
                    ring = TcpRing::connect(0, peers, listen_addr, listen_port, Clock::now(), &e);
                }
                fault.step_delay = std::chrono::milliseconds(step_delay_ms);
                return allreduce_checks(*ring, allreduce_bytes, iterations, Clock::now() + bound, fault);
            }));
        }
    }

    // The fabric NICs last, after the ring's own figures. A VM without RDMA
    // checks in a ring with them keeps step and reports nothing.
    if (rdma_in_ring && !ring_only) {
        std::string why_not;
        if (peers.size() > 1 && !ring) why_not = "ring bootstrap failed: " + ring_error;
        // A hung all-reduce's thread may still hold the ring.
        else if (any_abandoned())
            why_not = "an earlier check hung and may still use the ring";
        std::string e;
        const auto ports = rdma_ports(rdma.sysfs_root, &e);
        if (!why_not.empty()) {
            if (!rdma.passive) {
                report.checks.push_back(rdma_ports_check(ports, e));
                for (const bool count : {true, false}) {
                    Check c{count ? "rdma_unreachable_peers" : "rdma_write_bw_gbps", 0, std::nullopt,
                            count ? "peers" : "GB/s", count ? "<=" : ">="};
                    c.verdict = Verdict::Fail;
                    c.detail = why_not;
                    report.checks.push_back(c);
                }
            }
        } else {
            const int rails = static_cast<int>(std::max<size_t>(1, ports.size()));
            const auto rdma_bound = rdma_checks_bound(static_cast<int>(peers.size()), rails, rdma);
            std::vector<std::string> names;
            if (!rdma.passive) names = {"rdma_ports_down", "rdma_unreachable_peers", "rdma_write_bw_gbps"};
            // Shared with the check's thread, which a hang leaves behind.
            auto evidence = std::make_shared<std::pair<std::mutex, nlohmann::json>>();
            add(run_bounded(names, rdma_bound, [&, evidence] {
                nlohmann::json ev;
                auto checks = rdma_checks(ring.get(), rank, rdma_peers, rdma, Clock::now() + rdma_bound, &ev);
                std::lock_guard<std::mutex> lock(evidence->first);
                evidence->second = std::move(ev);
                return checks;
            }));
            std::lock_guard<std::mutex> lock(evidence->first);
            report.rdma = evidence->second;
        }
    }

    for (auto& c : report.checks) {
        if (!c.threshold) c.threshold = thresholds.get(c.name);
        c.judge();
    }
    auto doc = to_json(report);
    doc["profile"] = thresholds.profile();
    std::printf("%s\n", doc.dump(2).c_str());
    std::fflush(stdout);
    const int rc = report.verdict() == Verdict::Fail ? 1 : 0;
    // A hung check's thread is still out there: leave without waiting for it.
    if (any_abandoned()) std::_Exit(rc);
    return rc;
}
