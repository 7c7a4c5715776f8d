// The smoke job's RDMA checks, per fabric NIC of the VM (docs/smoke.md):
//   rdma_ports_down         ports of this VM's RDMA devices that are not
//                           ACTIVE (a ceiling, 0), each named with its
//                           device and network interface; no RDMA device at
//                           all fails it too;
//   rdma_unreachable_peers  ring members this VM's RDMA devices could not
//                           write to (a ceiling, 0), all to all: in round k
//                           rank r writes to rank r+k, rail i to rail i;
//   rdma_write_bw_gbps      the slowest of those RDMA writes, GB/s (perftest's
//                           ib_write_bw; every pair's figure in the detail).
// Rails are the VM's RDMA devices in name order (mlx5_0, mlx5_1, ... on a
// GPU VM; rxe_eth1 over Soft-RoCE in the lab). perftest makes its own TCP
// connection to set each pair up, through the forward the vm stage gives
// every VM with RDMA checks (provisioner/vm/guest_contract.h); the ranks'
// TCP ring keeps them in step, so each perftest server is listening before
// its client starts.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/check.h"
#include "pipelines/smoke/tcp_ring.h"

namespace kiln::smoke {

// One port of an RDMA device, from sysfs (class/infiniband).
struct RdmaPort {
    std::string device;  // mlx5_0, rxe_eth1
    int port = 1;
    std::string state;       // ACTIVE, DOWN, INIT, ... (the state file without its number)
    std::string link_layer;  // Ethernet | InfiniBand
    std::string netdev;      // the GID's network interface (RoCE); "" on InfiniBand
    int gid_index = -1;      // the GID perftest uses (-x); -1: none usable
    std::string gid;
    // The PCI function the device sits on, as this VM's kernel numbers it
    // ("0000:03:00.0"); for Soft-RoCE, its network interface's. "" where
    // sysfs shows none. The smoke stage names the host function behind it.
    std::string pci;
    std::string pci_path;  // that function's resolved sysfs path ("" with no pci)
    bool active() const { return state == "ACTIVE"; }
    std::string label() const;  // "rxe_eth1 port 1 (eth1)"
};

// Every port of every RDMA device under `sysfs_root`/class/infiniband, in
// device name order. The GID chosen on RoCE is RoCE v2, an IPv4-mapped one
// first (routable), else the first non-zero one (the link-local GID from
// the MAC, all Soft-RoCE over a NIC without addresses has).
std::vector<RdmaPort> rdma_ports(const std::string& sysfs_root, std::string* err);

// The PCI function at or above `device_link` (a sysfs "device" link):
// the last component of its resolved path shaped like a PCI address.
// `path` (when given) gets the resolved path up to that component.
std::string pci_function_of(const std::string& device_link, std::string* path = nullptr);

// A PCI function and its resolved sysfs path (its place in the PCIe tree).
struct PciFunction {
    std::string address;
    std::string path;
};

// NVIDIA GPUs (vendor 0x10de, class 0x0300xx or 0x0302xx) under
// `sysfs_root`/bus/pci/devices, in address order.
std::vector<PciFunction> nvidia_gpus(const std::string& sysfs_root);

// The GPU nearest `port` in the PCIe tree (the most path components in
// common: behind the same switch before the same root port); ties go to
// the lower address. "" when the port has no PCI function or there are no
// GPUs.
std::string nearest_gpu(const RdmaPort& port, const std::vector<PciFunction>& gpus);

// Whether `perftest` can write from GPU memory: its --help lists
// --use_cuda_bus_id only when it was built with CUDA. `why` says why not.
bool perftest_has_gpu_memory(const std::string& perftest, std::chrono::milliseconds bound, std::string* why);

// rdma_ports_down over `ports` (`err`: why there are none).
Check rdma_ports_check(const std::vector<RdmaPort>& ports, const std::string& err);

// perftest's bandwidth figures from its table (--report_gbits: Gb/s).
struct PerftestFigure {
    long bytes = 0;
    long iterations = 0;
    double peak_gbit = 0;
    double average_gbit = 0;
    double message_rate_mpps = 0;  // 0: the column was absent
    // The average in Gb/s from the message rate where perftest gave it: its
    // Gb/s columns have two decimals, so Soft-RoCE between busy TCG guests
    // (about 0.008 Gb/s) reads 0.00 or 0.01 there; the rate has six.
    double average_gbit_precise() const {
        return message_rate_mpps > 0 ? message_rate_mpps * static_cast<double>(bytes) * 8.0 / 1000.0 : average_gbit;
    }
};
std::optional<PerftestFigure> parse_perftest_bw(const std::string& output);

// One pair's write bandwidth in GB/s. perftest turns CPU cycles into
// seconds with the frequency it sampled, and a guest whose clock is off
// (TCG on a starved host) can report far less than it moved. The client's
// own run, timed by kiln-smoke's monotonic clock with the setup included,
// moved bytes x iterations: that bounds the average from below. A perftest
// figure under the bound is its clock's error; the bound stands, and
// `note` says so ("" when perftest's figure is used).
double pair_write_gbs(const PerftestFigure& fig, std::chrono::nanoseconds client_wall, std::string* note);

// A member of the ring as the RDMA checks see it.
struct RdmaPeer {
    std::string name;  // its VM, for the details
    std::string host;  // where its perftest server is reached
    int port = 0;      // 0: the VM has no RDMA checks configured
};

struct RdmaOptions {
    std::string perftest = "ib_write_bw";
    std::string sysfs_root = "/sys";
    int listen_port = 18515;  // where this VM's perftest server listens
    size_t bytes = 65536;
    int iterations = 200;
    // perftest -u: the QP's transport timeout, 4.096 us * 2^N per retry.
    // 18 (about 1 s; NCCL_IB_TIMEOUT's default in NCCL releases between
    // older ones' 14 and the newest ones' 20) rather than
    // perftest's 14 (67 ms): a peer descheduled for half a second (a TCG
    // guest on a busy host) is not a broken link; a dead one is still given
    // up on in about 7 s, inside the pair's bound.
    int qp_timeout = 18;
    std::chrono::milliseconds per_run{30000};
    // Where the writes come from: "auto" (each rail's nearest GPU's memory
    // where the VM has GPUs and perftest was built with CUDA, else host
    // memory, said in the detail), "on" (GPU memory or rdma_write_bw_gbps
    // fails with the reason), "off" (host memory).
    std::string gpu_memory = "auto";
    // This VM has no RDMA checks while others of its ring do: it keeps step
    // with their rounds (they meet on the ring), tests nothing, reports nothing.
    bool passive = false;
};

// Every rank of the ring calls this at the same point (the ring carries
// their rounds); `ring` is null for a VM alone, which writes to itself.
// `evidence` (when given) gets what the smoke stage judges the ring by:
// {"ports_down": [label...], "unreachable": [{"vm", "rank", "rail", "why"}],
//  "pairs": [{"vm", "rank", "rail", "gbps"}],
//  "rails": [{"rail", "device", "port", "netdev", "pci", "active", "gpu"}],
//  "memory": "gpu" | "host", "memory_note": why host memory (where it is)}.
// "gpu" is the GPU whose memory the rail's writes used ("" for host memory).
std::vector<Check> rdma_checks(TcpRing* ring, int rank, const std::vector<RdmaPeer>& peers, const RdmaOptions& options,
                               Deadline deadline, nlohmann::json* evidence = nullptr);

// How long rdma_checks may take for a ring of `ranks` with `rails` each.
std::chrono::milliseconds rdma_checks_bound(int ranks, int rails, const RdmaOptions& options);

// Every rank's `mine`, by rank, round the ring (n-1 exchanges): no rank
// returns before every rank has called it, so it is the rounds' barrier.
bool ring_allgather(TcpRing& ring, const std::string& mine, std::vector<std::string>* all, Deadline deadline,
                    std::string* err);

}  // namespace kiln::smoke
