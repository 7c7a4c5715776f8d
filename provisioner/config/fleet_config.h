// The fleet config model: what `fleet.toml` declares, after validation.
// The loader (fleet_loader.h) fills it; nothing else parses TOML.
// Every struct keeps the source position of its table so later stages can
// report errors as FILE:LINE:COL too.
#pragma once

#include <any>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/secret.h"

namespace kiln::config {

struct SourcePos {
    std::string file;
    int line = 0;
    int column = 0;
    std::string str() const;  // "file:line:col"
};

using Duration = std::chrono::milliseconds;

struct RoceProfile {
    std::string name;
    int lossless_priority = 3;
    int roce_dscp = 26;
    int cnp_dscp = 48;
    int cnp_priority = 6;
    int ecn_min_kb = 150;
    int ecn_max_kb = 1500;
    int ecn_probability_pct = 10;
    std::string pfc_watchdog_action = "drop";  // drop | forward | alert
    int pfc_watchdog_detection_ms = 200;
    int pfc_watchdog_restoration_ms = 400;
    // SONiC's PFC_WD|GLOBAL POLL_INTERVAL, which kiln writes: detection and
    // restoration must be at least this (SONiC's YANG refuses the patch
    // otherwise). 200 is SONiC's own default.
    int pfc_watchdog_poll_ms = 200;
    int host_mtu = 9000;
    int switch_mtu = 9216;
    std::string buffer_policy = "lossless";  // lossless | default
    // Priorities with PFC: the loader accepts only lossless_priority (PFC on
    // a priority no RoCE traffic uses pauses the link for nothing).
    std::vector<int> pfc_priorities{3};
    // The keys the fleet file wrote ("ecn_probability_pct",
    // "pfc_watchdog.detection_ms"); the rest hold kiln's defaults above. A
    // renderer whose platform has its own defaults keeps those for keys not
    // written here (NVUE's RoCE mode: ECN thresholds and probability).
    std::set<std::string> given;
    bool is_given(const std::string& key) const { return given.count(key) != 0; }
    SourcePos pos;
};

struct VmShape {
    std::string name;
    std::string split = "whole";  // whole | numa | count
    int count = 0;                // split = "count": that many CPU-only VMs (hosts without GPUs)
    int vcpus = 0;                // 0: all host CPUs of the VM's NUMA nodes
    int memory_gib = 0;           // 0: derived from the host
    bool hugepages = true;
    std::string hugepage_size = "1G";                 // 1G | 2M
    std::string accelerator = "auto";                 // auto (probe KVM, else TCG) | kvm | tcg
    std::string network = "slirp";                    // slirp | passt | none (guest_contract.h)
    std::string sysfs = "/sys";                       // host sysfs root; a recorded tree for rehearsal
    std::string images_dir;                           // overlays, seeds, serial logs; "" = <fleet dir>/.kiln/vm
    std::string base_image;                           // the cached guest image the overlays sit on
    Duration boot_timeout{std::chrono::minutes(10)};  // start to the readiness marker
    // Under TCG, how many VMs boot at once on one hypervisor (boot_gate.h).
    int tcg_parallel_boots = 1;
    std::vector<std::string> ssh_authorized_keys;  // for the guest user (cloud-init)
    // Rehearsal: each VM gets one emulated fabric NIC (virtio-net) on this
    // host bridge, over which the lite guest image runs Soft-RoCE; "" = none.
    std::string fabric_bridge;
    // The smoke job's RDMA checks (docs/smoke.md), which need a port forward
    // for perftest's connection setup: on by default with fabric_bridge; set
    // it for VMs given their fabric NICs by passthrough.
    bool rdma_checks = false;
    SourcePos pos;
};

struct SmokeProfile {
    std::string name;
    std::map<std::string, double> thresholds;  // check name -> floor (or ceiling by check)
    Duration timeout{std::chrono::minutes(20)};
    // Which VMs share one ring: "node" (each node's own VMs), "rack" (every
    // node of a rack with this profile) or "fleet" (every node with it).
    std::string scope = "node";
    SourcePos scope_pos;  // line 0: not written
    // Fleet-relative verdicts (docs/smoke.md): a VM whose floor-type figure
    // is below this fraction of the ring's median warns or fails. 0: off.
    double relative_floor = 0;
    std::string relative_verdict = "fail";  // warn | fail
    // The RDMA checks' writes (docs/smoke.md, "RDMA checks"): bytes per
    // write, writes per pair, and one pair's bound. Unset: kiln-smoke's
    // defaults (64 KiB, 200, 30 s). A 400 Gb/s rail wants more bytes than
    // that to measure; a TCG lab fewer.
    std::optional<int64_t> rdma_bytes;
    std::optional<int64_t> rdma_iterations;
    std::optional<Duration> rdma_pair_timeout;
    SourcePos pos;
};

// [store]: the journal in a PostgreSQL database that several kiln processes
// share, instead of the SQLite file beside the fleet. The URL carries no
// password; `password` is a secret reference read when connecting.
struct StoreConfig {
    std::string url;  // postgresql://[user@]host[:port]/database[?...]
    std::optional<Secret> password;
    SourcePos pos;
};

struct Limits {
    int parallel = 32;        // node-stages executing at once, fleet-wide
    int per_rack = 0;         // nodes of one rack executing at once; 0 = no limit
    int per_bmc = 2;          // executions holding one BMC endpoint at once
    int per_switch = 1;       // executions holding one switch at once
    int max_unavailable = 0;  // nodes out of service at once; 0 = no limit
    int retries = 3;          // extra attempts for transient errors
    Duration backoff_initial{std::chrono::seconds(2)};
    Duration backoff_max{std::chrono::seconds(120)};
    Duration default_timeout{std::chrono::minutes(60)};
    std::map<std::string, Duration> stage_timeouts;  // stage name -> timeout
    SourcePos pos;

    Duration timeout_for(const std::string& stage) const;
};

// One front-panel port of a switch, named as the switch OS names it
// ("Ethernet0" on SONiC, "swp1" on Cumulus, "Ethernet1/1" on EOS).
struct SwitchPort {
    std::string name;
    int speed_mbps = 400000;  // SONiC's unit for PORT.speed
    std::string lanes;        // "0,1,2,3"; SONiC needs them, others ignore them
    std::string alias;        // front-panel label; "" = none
    SourcePos pos;
};

struct Switch {
    std::string name;
    std::string os;       // sonic | nvue | eos
    std::string address;  // management address (host or URL)
    std::string username;
    std::optional<Secret> password;
    std::string ssh_key;      // SONiC: SSH identity file (resolved path); "" = agent
    std::string known_hosts;  // SONiC: known_hosts file pinning the switch's host key
    int rail = -1;            // the rail this switch serves; -1 = not rail-optimised
    std::vector<SwitchPort> ports;
    SourcePos pos;

    // Linear until Fleet::index() has filled port_index (the loader does):
    // every node's network inputs look ports up.
    const SwitchPort* find_port(const std::string& name) const;
    std::unordered_map<std::string, size_t> port_index;  // port name -> position in `ports`
};

// A node NIC the fabric is cabled to ("mlx5_0", "ens1f0"), written in
// `nics` as its name alone or as a table with the host-side details the
// network stage needs to set it (with a managed `host`).
struct NodeNic {
    std::string name;
    std::string ifname;                   // the netdev on the host ("ens1f0np0"); "" = same as name
    std::optional<int> vfs;               // SR-IOV VFs wanted (sriov_numvfs); unset = left alone
    bool firmware = false;                // ConnectX firmware SRIOV_EN, NUM_OF_VFS = vfs, ATS_ENABLED (set, one reboot)
    std::optional<int> max_acc_out_read;  // with firmware: ConnectX MAX_ACC_OUT_READ, where the NIC has it
    SourcePos pos;

    const std::string& netdev() const { return ifname.empty() ? name : ifname; }
};

// `host`: how kiln reaches a node's operating system to set its NICs (the
// network stage's host side). Exactly one way, or none (not managed):
//   ssh    address = "HOST[:PORT]", with username, ssh_key, known_hosts as
//          for a SONiC switch (key-only, host key checked strictly)
//   local  local = true: kiln runs on the host itself
//   netns  netns = "NAME": commands run through `ip netns exec NAME`, for
//          rehearsal hosts emulated by a network namespace
struct HostAccess {
    std::string mode;         // "" (not managed) | ssh | local | netns
    std::string address;      // ssh
    std::string username;     // ssh; "" = ssh's default
    std::string ssh_key;      // ssh; identity file (resolved path); "" = agent
    std::string known_hosts;  // ssh; required
    std::string netns;        // netns
    // Settings ("mtu", "sriov", "dscp_trust", "pfc", "ecn", "firmware") whose
    // unsupported outcome stops the stage instead of warning (and needs-reboot,
    // on a local or netns host, which kiln does not reboot).
    std::vector<std::string> require;
    Duration timeout{std::chrono::seconds(30)};  // each command on the host
    // The wait for the host to come back after the one reboot that ConnectX
    // firmware settings need (network stage, nic_firmware.h).
    Duration reboot_timeout{std::chrono::minutes(15)};
    SourcePos pos;

    bool managed() const { return !mode.empty(); }
    // "ssh root@10.0.0.5:2222", "local", "netns lab-gpu-01": for messages.
    std::string describe() const;
};

// [[cabling]]: node NIC -> switch port. Each switch port and each NIC
// appears at most once.
struct Cable {
    std::string node;
    std::string nic;
    std::string switch_name;
    std::string port;
    // Metres; 0 = the default for a host link (5 m). PFC headroom grows with it.
    int cable_length_m = 0;
    SourcePos pos;
};

// [[uplinks]]: switch port -> switch port (leaf to spine). Each switch port
// appears at most once across [[cabling]] and [[uplinks]].
struct Uplink {
    std::string switch_name;
    std::string port;
    std::string peer_switch;
    std::string peer_port;
    // Metres; 0 = the default for a switch-to-switch link (40 m).
    int cable_length_m = 0;
    SourcePos pos;
};

struct Rack {
    std::string name;
    std::vector<std::string> switches;
    SourcePos pos;
};

struct Bmc {
    std::string url;
    std::string username;
    std::optional<Secret> password;
    std::string ca_bundle;    // path; empty = system store
    std::string fingerprint;  // pinned sha256 of the certificate, hex
    bool verify_tls = true;
    // The node's ComputerSystem on a BMC that fronts several (a blade
    // enclosure): its @odata.id. "" = the BMC's first system.
    std::string system;
};

struct Node {
    std::string name;
    std::string rack;
    std::string role;  // pipeline name, e.g. "gpu-node"
    Bmc bmc;
    std::string network;  // RoceProfile name
    std::string vm;       // VmShape name
    std::string smoke;    // SmokeProfile name
    std::map<std::string, std::string> labels;
    std::vector<NodeNic> nics;  // RDMA NICs cabled to the fabric
    HostAccess host;            // how the network stage reaches its NICs; not managed by default
    std::string libvirt_uri;    // hypervisor of this node's VMs; "" = qemu:///system (local)
    SourcePos pos;

    // The profiles this node picks in stage modules' tables, by node key
    // (config_table.h: node_key), e.g. {"firmware", "h100-2026q4"}: in the
    // order the modules registered them; a key not written is absent.
    std::vector<std::pair<std::string, std::string>> profiles;

    const NodeNic* find_nic(const std::string& name) const;
    // The profile named at `node_key`, or "" when the node names none.
    const std::string& profile(std::string_view node_key) const;
    void set_profile(const std::string& node_key, const std::string& name);
};

// pipelines/<name>.toml: the stage order for one role.
struct Pipeline {
    std::string name;
    std::string description;
    std::vector<std::string> stages;
    std::string path;
};

// A table a stage module owns (config_table.h), as its reader returned it.
struct TableValue {
    std::any value;
    std::vector<Secret> secrets;  // every secret reference the table names
    SourcePos pos;
};

struct Fleet {
    int schema = 1;
    std::string name;
    std::string path;           // the fleet file as given
    std::string dir;            // its folder: relative paths resolve here
    std::string pipelines_dir;  // where <role>.toml pipelines live
    std::string sha256;         // digest of the fleet file's bytes

    Limits limits;
    std::vector<Rack> racks;
    std::vector<Switch> switches;
    std::vector<Node> nodes;
    std::vector<Cable> cabling;   // in file order
    std::vector<Uplink> uplinks;  // in file order
    std::map<std::string, RoceProfile> network;
    std::map<std::string, VmShape> vm;
    std::map<std::string, SmokeProfile> smoke;
    std::optional<StoreConfig> store;           // absent: the SQLite journal
    std::map<std::string, Pipeline> pipelines;  // by name; every node role is one
    std::map<std::string, TableValue> tables;   // stage modules' own tables, by key

    // The value of a stage module's table, or nullptr when the file has no
    // such table (or it holds another type).
    template <class T>
    const T* table(const std::string& key) const {
        auto it = tables.find(key);
        return it == tables.end() ? nullptr : std::any_cast<T>(&it->second.value);
    }
    // The profile `node` picks by `node_key` in a module's table of named
    // profiles (config_table.h), or nullptr when it picks none.
    template <class P>
    const P* picked(const std::string& key, const Node& node, std::string_view node_key) const {
        const auto* all = table<std::map<std::string, P>>(key);
        if (!all) return nullptr;
        auto it = all->find(node.profile(node_key));
        return it == all->end() ? nullptr : &it->second;
    }

    const Node* find_node(const std::string& name) const;
    const Rack* find_rack(const std::string& name) const;
    const Switch* find_switch(const std::string& name) const;
    // The nodes whose VMs share one smoke ring with this node's, in fleet
    // order, the node included (just the node for scope "node").
    std::vector<const Node*> smoke_ring(const Node& node) const;
    // The cables from this node, in file order.
    std::vector<const Cable*> cables_of(const std::string& node) const;
    // The uplinks with `switch_name` at either end, in file order.
    std::vector<const Uplink*> uplinks_of(const std::string& switch_name) const;

    // Builds the indexes behind find_node, find_rack, find_switch,
    // Switch::find_port, cables_of and uplinks_of (the loader runs it): every
    // node's inputs and plan look these up, so linear lookups would make a
    // fleet's plan quadratic. Before it, or once a vector has changed size
    // since, each lookup falls back to a linear scan.
    void index();
    void index_cables() { index(); }  // the names earlier callers know
    void index_nodes() { index(); }

private:
    std::unordered_map<std::string, std::vector<size_t>> cables_by_node_;     // positions in `cabling`
    std::unordered_map<std::string, std::vector<size_t>> uplinks_by_switch_;  // positions in `uplinks`
    std::unordered_map<std::string, size_t> node_at_, rack_at_, switch_at_;
    // Nodes by smoke profile (fleet scope) and by smoke profile and rack
    // ("profile\nrack"), positions in `nodes`: smoke_ring's candidates.
    std::unordered_map<std::string, std::vector<size_t>> smoke_by_fleet_, smoke_by_rack_;
    size_t cables_indexed_ = static_cast<size_t>(-1);  // cabling.size() when indexed
    size_t uplinks_indexed_ = static_cast<size_t>(-1);
    size_t nodes_indexed_ = static_cast<size_t>(-1);
    size_t racks_indexed_ = static_cast<size_t>(-1);
    size_t switches_indexed_ = static_cast<size_t>(-1);
};

}  // namespace kiln::config
