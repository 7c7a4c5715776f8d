#include "pipelines/smoke/stage/smoke_inputs.h"

#include "pipelines/smoke/stage/smoke_config.h"

namespace kiln::smoke {

nlohmann::json smoke_inputs(const config::Fleet& fleet, const config::Node& node) {
    using nlohmann::json;
    const std::string& name = node.profile(kSmokeTable);
    const SmokeProfile* picked = smoke_profile(fleet, node);
    if (!picked) return {{"profile", name}, {"thresholds", json::object()}, {"timeout_ms", 0}};
    const auto& p = *picked;
    json in = {{"profile", name}, {"thresholds", p.thresholds}, {"timeout_ms", p.timeout.count()}};
    if (p.relative_floor > 0) in["relative"] = {{"floor", p.relative_floor}, {"verdict", p.relative_verdict}};
    if (p.rdma_bytes || p.rdma_iterations || p.rdma_pair_timeout) {
        json rdma = json::object();
        if (p.rdma_bytes) rdma["bytes"] = *p.rdma_bytes;
        if (p.rdma_iterations) rdma["iterations"] = *p.rdma_iterations;
        if (p.rdma_pair_timeout) rdma["pair_timeout_ms"] = p.rdma_pair_timeout->count();
        in["rdma"] = rdma;
    }
    // A shared ring's members: a node joining or leaving the ring runs it again.
    if (p.scope != "node") {
        json ring = json::array();
        for (const config::Node* n : smoke_ring(fleet, node)) ring.push_back(n->name);
        in["scope"] = p.scope;
        in["ring"] = ring;
    }
    return in;
}

}  // namespace kiln::smoke
