#include "provisioner/engine/scheduler.h"

#include <algorithm>

namespace kiln::engine {

Scheduler::Scheduler(const config::Limits& limits) : limits_(limits) {}

int Scheduler::capacity_of(const std::string& resource) const {
    auto kind = resource.substr(0, resource.find(':'));
    if (kind == "bmc") return limits_.per_bmc > 0 ? limits_.per_bmc : 1;
    if (kind == "switch") return limits_.per_switch > 0 ? limits_.per_switch : 1;
    return 1;
}

std::string Scheduler::blocker(const Job& job) const {
    if (running_ >= std::max(limits_.parallel, 1)) return "parallel";
    if (limits_.per_rack > 0) {
        auto it = rack_running_.find(job.rack);
        if (it != rack_running_.end() && it->second >= limits_.per_rack) return "rack:" + job.rack;
    }
    for (const auto& r : job.resources) {
        auto it = resource_running_.find(r);
        if (it != resource_running_.end() && it->second >= capacity_of(r)) return r;
    }
    if (limits_.max_unavailable > 0 && !admitted(job.node) &&
        static_cast<int>(admitted_.size()) >= limits_.max_unavailable)
        return "unavailable";
    return "";
}

void Scheduler::start(const Job& job) {
    ++running_;
    ++rack_running_[job.rack];
    for (const auto& r : job.resources) ++resource_running_[r];
    admitted_.insert(job.node);
}

void Scheduler::finish(const Job& job) {
    --running_;
    if (--rack_running_[job.rack] <= 0) rack_running_.erase(job.rack);
    for (const auto& r : job.resources) {
        if (--resource_running_[r] <= 0) resource_running_.erase(r);
    }
}

std::vector<std::pair<std::string, int>> Scheduler::limits_of(const Job& job) const {
    std::vector<std::pair<std::string, int>> out = {{"parallel", std::max(limits_.parallel, 1)}};
    if (limits_.per_rack > 0) out.emplace_back("rack:" + job.rack, limits_.per_rack);
    for (const auto& r : job.resources) out.emplace_back(r, capacity_of(r));
    return out;
}

void Scheduler::release(const std::string& node) {
    admitted_.erase(node);
}

}  // namespace kiln::engine
