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
    std::vector<Cable> cabling;                 // in file order
    std::vector<Uplink> uplinks;                // in file order
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
    // The profile `name` in a module's table of named profiles
    // (config_table.h), or nullptr when the table has none of that name.
    template <class P>
    const P* profile(const std::string& key, const std::string& name) const {
        const auto* all = table<std::map<std::string, P>>(key);
        if (!all) return nullptr;
        auto it = all->find(name);
        return it == all->end() ? nullptr : &it->second;
    }
    // The profile `node` picks by `node_key` in such a table, or nullptr
    // when it picks none.
    template <class P>
    const P* picked(const std::string& key, const Node& node, std::string_view node_key) const {
        return profile<P>(key, node.profile(node_key));
    }

    const Node* find_node(const std::string& name) const;
    const Rack* find_rack(const std::string& name) const;
    const Switch* find_switch(const std::string& name) const;
    // The nodes that pick profile `name` by `node_key` (config_table.h), in
    // fleet order; with `rack`, only that rack's. Indexed by index() for the
    // node keys in `grouped_picks` (a module's ring, say, asks this for each
    // node); linear otherwise.
    std::vector<const Node*> nodes_picking(const std::string& node_key, const std::string& name,
                                           const std::string* rack = nullptr) const;
    std::set<std::string> grouped_picks;  // node keys nodes_picking indexes (ConfigTable::group_nodes)
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
    // Nodes by pick ("key\nname") and by pick and rack ("key\nname\nrack"),
    // positions in `nodes`, for the keys in grouped_picks: nodes_picking's.
    std::unordered_map<std::string, std::vector<size_t>> picks_by_fleet_, picks_by_rack_;
    std::set<std::string> picks_indexed_;              // grouped_picks when indexed
    size_t cables_indexed_ = static_cast<size_t>(-1);  // cabling.size() when indexed
    size_t uplinks_indexed_ = static_cast<size_t>(-1);
    size_t nodes_indexed_ = static_cast<size_t>(-1);
    size_t racks_indexed_ = static_cast<size_t>(-1);
    size_t switches_indexed_ = static_cast<size_t>(-1);
};

}  // namespace kiln::config
