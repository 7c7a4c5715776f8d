// Admission control for a run: which node may start its next stage now.
// Pure bookkeeping, no threads: the engine asks, starts, and reports back.
//   parallel         node-stages executing at once, fleet-wide
//   per_rack         nodes of one rack executing at once (0 = no limit)
//   per resource kind stage resources "bmc:*" capped by per_bmc, "switch:*"
//                    by per_switch, other kinds by 1
//   max_unavailable  nodes taken out of service at once (0 = no limit); a
//                    node is out from its first stage until it finishes, and
//                    stays out if it failed, which halts a rolling reimage
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "provisioner/config/fleet_config.h"

namespace kiln::engine {

struct Job {
    std::string node;
    std::string rack;
    std::vector<std::string> resources;  // "kind:id"
};

class Scheduler {
public:
    explicit Scheduler(const config::Limits& limits);

    // "" when the job may start now; otherwise the key of the first limit
    // in the way ("parallel", "rack:r1", "bmc:10.0.0.1:443", "unavailable").
    std::string blocker(const Job& job) const;
    void start(const Job& job);
    void finish(const Job& job);

    // The node leaves service (counts against max_unavailable) on its first
    // start; release() when it is back (verified/ready). Failed nodes are
    // never released during the run.
    bool admitted(const std::string& node) const { return admitted_.count(node) != 0; }
    void release(const std::string& node);

    int running() const { return running_; }
    int unavailable() const { return static_cast<int>(admitted_.size()); }
    int capacity_of(const std::string& resource) const;
    // The counting limits a job takes one unit of while it runs, with their
    // capacities: "parallel", "rack:R" (when per_rack is set) and each
    // resource. Stores shared by workers hold these fleet-wide (slots).
    // Reads only the limits: safe from any thread.
    std::vector<std::pair<std::string, int>> limits_of(const Job& job) const;

private:
    config::Limits limits_;
    int running_ = 0;
    std::map<std::string, int> rack_running_;
    std::map<std::string, int> resource_running_;
    std::set<std::string> admitted_;
};

}  // namespace kiln::engine
