// How the smoke stage reaches kiln-smoke in a node's VMs. Two
// implementations: GuestAgentTransport (libvirt's QEMU guest agent,
// guest-exec, for real VMs) and LocalProcessTransport (kiln-smoke processes
// on this host over loopback, for tests and rehearsal).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"

namespace kiln::smoke {

// One rank to start: the VM (domain name) and kiln-smoke's arguments.
struct RankLaunch {
    std::string vm;
    std::vector<std::string> args;  // without the program path
};

struct RankOutput {
    std::string vm;
    int exit_code = -1;
    bool timed_out = false;
    std::string out;
    std::string err;
};

// Where a rank listens and how the other ranks reach it.
struct RankAddress {
    std::string dial_host;  // what peers put in --peers
    int dial_port = 0;
    std::string listen_addr;  // kiln-smoke --listen-addr
    int listen_port = 0;      // kiln-smoke --listen-port
};

class SmokeTransport {
public:
    virtual ~SmokeTransport() = default;
    virtual std::string name() const = 0;
    // The node's VMs (domain names, guest_contract.h), in VM index order,
    // on the node's hypervisor (node.libvirt_uri).
    virtual Result<std::vector<std::string>> list_vms(const config::Node& node) = 0;
    // The address of the VM with this fleet-wide ordinal.
    virtual RankAddress address(int ordinal) const = 0;
    // Starts every rank at once and waits for all of them, at most `timeout`.
    // A rank that does not finish comes back timed_out; an error only when
    // the ranks could not be started at all.
    virtual Result<std::vector<RankOutput>> run(const config::Node& node, const std::vector<RankLaunch>& ranks,
                                                std::chrono::milliseconds timeout) = 0;
};

}  // namespace kiln::smoke
