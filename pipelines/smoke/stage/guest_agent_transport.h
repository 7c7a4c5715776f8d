// kiln-smoke in real VMs through the QEMU guest agent: guest-exec starts
// it (output captured by the agent), guest-exec-status is polled until it
// exits or the deadline passes. Every agent call has its own timeout.
// Ranks reach each other through the host's port forwards
// (guest_contract.h): dial 10.0.2.2:<base + ordinal>, listen on 0.0.0.0:29500.
#pragma once

#include "pipelines/smoke/stage/smoke_transport.h"

namespace kiln::smoke {

struct GuestAgentOptions {
    std::string uri = "qemu:///system";  // for nodes without libvirt_uri
    std::string smoke_path;              // default: vm::kGuestSmokePath
    int port_base = 0;                   // default: vm::kSmokeHostPortBase
    std::chrono::milliseconds poll_interval{500};
    int agent_timeout_s = 10;  // per agent command
};

class GuestAgentTransport : public SmokeTransport {
public:
    explicit GuestAgentTransport(GuestAgentOptions options);
    std::string name() const override { return "guest-agent"; }
    Result<std::vector<std::string>> list_vms(const config::Node& node) override;
    RankAddress address(int ordinal) const override;
    Result<std::vector<RankOutput>> run(const config::Node& node, const std::vector<RankLaunch>& ranks,
                                        std::chrono::milliseconds timeout) override;

private:
    GuestAgentOptions options_;
};

// For tests: the guest-exec command for one rank, as JSON text.
std::string guest_exec_command(const std::string& path, const std::vector<std::string>& args);

}  // namespace kiln::smoke
