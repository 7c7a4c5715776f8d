// The fabric as the network stage renders it: each switch of the fleet with
// its ports, and what each port is cabled to: a node NIC, or a port of
// another switch (an uplink, leaf to spine). The fleet config declares ports,
// [[cabling]] and [[uplinks]]; tests and benchmarks may also give ports
// beside it as SwitchPorts.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "network/stage/network_config.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"

namespace kiln::network {

// The far end of a switch port: a node and the NIC on it ("mlx5_0", "ens1f0").
struct Cable {
    std::string node;
    std::string nic;
};

// The far end of a switch-to-switch port: the other switch and its port.
struct SwitchLink {
    std::string switch_name;
    std::string port;
    // Neither end is cabled to a node (spine to super-spine): set by
    // build_fabric; such a link crosses the data hall.
    bool core = false;
};

struct Port {
    std::string name;                  // SONiC style, "Ethernet0"
    int speed_mbps = 400000;           // SONiC's unit for PORT.speed
    std::string lanes;                 // "0,1,2,3": SONiC needs them; platform-specific
    std::string alias;                 // front-panel label; empty = none
    std::optional<Cable> peer;         // cabled to a node; empty: an uplink or unused
    std::optional<SwitchLink> uplink;  // cabled to another switch's port (never with `peer`)
    int cable_length_m = 0;            // the fleet's length; 0 = default for the link's role

    // Managed by the network stage: cabled to a node or to another switch.
    bool cabled() const { return peer.has_value() || uplink.has_value(); }
};

// Host links (node NIC to leaf) are short: 5 m unless the fleet says.
inline constexpr int kDefaultHostCableM = 5;
// Switch-to-switch links (leaf to spine) cross rows: 40 m unless the fleet says.
inline constexpr int kDefaultUplinkCableM = 40;
// Core links (spine to super-spine) cross the hall: 300 m unless the fleet says.
inline constexpr int kDefaultCoreCableM = 300;

// The length PFC headroom is sized for.
inline int cable_length_of(const Port& p) {
    if (p.cable_length_m > 0) return p.cable_length_m;
    if (!p.uplink) return kDefaultHostCableM;
    return p.uplink->core ? kDefaultCoreCableM : kDefaultUplinkCableM;
}

// Input: the ports of one switch, as an operator or a discovery step gives them.
struct SwitchPorts {
    std::string switch_name;
    std::vector<Port> ports;
};

struct FabricSwitch {
    std::string name;
    std::string os;    // sonic | nvue | eos, as in the fleet
    std::string rack;  // the rack listing it; empty when none does
    std::vector<Port> ports;
    bool leaf = false;  // a node is cabled to it (set by Fabric::index)

    const Port* find_port(const std::string& name) const;
};

// A cabled port, by position: fabric.switches[sw].ports[port].
struct PortRef {
    size_t sw = 0;
    size_t port = 0;
};

struct Fabric {
    std::vector<FabricSwitch> switches;  // in fleet order

    // Indexed once build_fabric has run index(); linear before (a fabric
    // built by hand).
    const FabricSwitch* find_switch(const std::string& name) const;
    // The ports cabled to `node`, in switch then port order; empty when none.
    const std::vector<PortRef>& ports_of(const std::string& node) const;
    // The uplink ports of switch i, in port order; empty when none.
    const std::vector<PortRef>& uplinks_of(size_t switch_index) const;
    // The port an uplink port faces, or null (not an uplink, or its peer is missing).
    const Port* facing(const Port& uplink_port, size_t* switch_index = nullptr) const;
    // The fleet node of that name (build_fabric's fleet), or null.
    const config::Node* find_node(const std::string& name) const;

    // Build the indexes above from `switches` and the fleet's nodes; again
    // after changing either.
    void index(const config::Fleet& fleet);

private:
    std::unordered_map<std::string, size_t> switch_at_;
    std::unordered_map<std::string, std::vector<PortRef>> ports_of_;
    std::vector<std::vector<PortRef>> uplinks_of_;  // by switch
    std::unordered_map<std::string, const config::Node*> nodes_;
    bool indexed_ = false;
};

// Every fleet switch, with the ports given for it (none when absent). Errors:
// ports for a switch the fleet lacks, duplicate port names, a cable to an
// unknown node, a non-positive speed, a port cabled to both a node and a
// switch, an uplink whose far port is missing or does not face it back.
Result<Fabric> build_fabric(const config::Fleet& fleet, const std::vector<SwitchPorts>& ports);

// The fabric the fleet config declares: each switch's `ports`, with the
// `[[cabling]]` entries as their peers and each `[[uplinks]]` entry on both
// of its ends. The loader has checked every
// reference, so errors here come only from build_fabric's own rules.
Result<Fabric> build_fabric(const config::Fleet& fleet);

// N ports "Ethernet0, Ethernet4, ..." of `lanes_per_port` lanes each, not
// cabled: the usual breakout-free numbering, for tests and benchmarks.
std::vector<Port> make_ports(int count, int speed_mbps = 400000, int lanes_per_port = 4);

// The RoCE profile a switch must carry: the one its cabled nodes name. A
// switch without cabled nodes (a spine, a super-spine) takes the one of the
// nearest leaves its uplinks reach, through any number of node-less switches
// (lossless holds only if every hop carries one profile), else the fleet's
// only profile. Errors when nodes or leaves disagree, or no profile applies.
Result<const network::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const FabricSwitch& sw);
// The same, finding nodes through the fabric's index.
Result<const network::RoceProfile*> profile_for_switch(const config::Fleet& fleet, const Fabric& fabric,
                                                       const FabricSwitch& sw);

}  // namespace kiln::network
