#include "provisioner/engine/stage.h"

#include "provisioner/engine/exclusive_locks.h"
#include "provisioner/engine/worker_pool.h"

namespace kiln::engine {

nlohmann::json node_identity_inputs(const config::Node& node) {
    return {{"node", node.name}, {"rack", node.rack}, {"role", node.role}, {"labels", node.labels}};
}

Result<nlohmann::json> Stage::inputs(const StageContext& ctx) const {
    return node_identity_inputs(ctx.node());
}

Result<std::string> Stage::input_text(const StageContext& ctx) const {
    auto in = inputs(ctx);
    if (!in) return in.error();
    return in->dump();
}

bool StageContext::wait_for(std::chrono::milliseconds d) const {
    // The pool may start another thread while this one sleeps.
    WorkerPool::BlockingRegion blocking;
    return stop_.wait_for(d, deadline_);
}

Status StageContext::park(Clock::time_point until, nlohmann::json state, std::string reason, std::string key) {
    std::string message = "parked: " + reason;
    park_ = ParkRequest{until, std::move(state), std::move(reason), std::move(key)};
    return make_error("engine", "engine.parked", message);
}

Result<std::unique_ptr<StageContext::Hold>> StageContext::hold_exclusive(const std::string& key) const {
    if (hold_) return hold_(*this, key);
    return ExclusiveLocks(nullptr, std::chrono::milliseconds(0)).acquire(*this, key);
}

Status StageContext::publish(const std::string& kind, int schema, const nlohmann::json& body) const {
    if (publish_) return publish_(kind, schema, body);
    return make_error("engine", "journal.required",
                      "cannot publish the " + kind + " record of " + node_.name + ": no journal");
}

Result<std::optional<StageContext::Published>> StageContext::latest_for(const std::string& node,
                                                                        const std::string& kind) const {
    if (latest_) return latest_(node, kind);
    return std::optional<Published>();
}

std::vector<std::string> Stage::resources(const config::Fleet&, const config::Node&) const {
    return {};
}

}  // namespace kiln::engine
