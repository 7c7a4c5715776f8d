// kiln-smoke ranks as processes on this host, on loopback: what tests and a
// rehearsal without VMs use. "VMs" are named as guest_contract.h names them;
// rank ports are port_base + the fleet-wide ordinal.
#pragma once

#include <memory>

#include "pipelines/smoke/stage/smoke_transport.h"
#include "provisioner/core/command.h"

namespace kiln::smoke {

struct LocalProcessOptions {
    std::string smoke_binary;  // path of kiln-smoke on this host
    int vms_per_node = 2;
    int port_base = 29600;
    std::shared_ptr<CommandRunner> runner;  // default: ProcessRunner
};

class LocalProcessTransport : public SmokeTransport {
public:
    explicit LocalProcessTransport(LocalProcessOptions options);
    std::string name() const override { return "local"; }
    Result<std::vector<std::string>> list_vms(const config::Node& node) override;
    RankAddress address(int ordinal) const override;
    Result<std::vector<RankOutput>> run(const config::Node& node, const std::vector<RankLaunch>& ranks,
                                        std::chrono::milliseconds timeout) override;

private:
    LocalProcessOptions options_;
};

}  // namespace kiln::smoke
