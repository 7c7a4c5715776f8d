#include "pipelines/smoke/ring_meeting.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "provisioner/engine/worker_pool.h"

namespace kiln::smoke {

Result<std::vector<std::string>> RingMeeting::meet(engine::StageContext& ctx, const std::vector<std::string>& ring) {
    const std::string key = fmt::format("{}", fmt::join(ring, ","));
    const std::string& self = ctx.node().name;
    // Holds this thread until the ring meets: the engine's pool starts
    // another, so the peers still queued can come (a ring larger than the
    // pool's core would otherwise never meet).
    engine::WorkerPool::BlockingRegion blocking;
    std::unique_lock<std::mutex> lock(mu_);
    auto& slot = open_[key];
    if (!slot) slot = std::make_shared<Meeting>();
    std::shared_ptr<Meeting> m = slot;
    m->arrived.push_back(self);
    cv_.notify_all();
    std::string last_missing;
    for (;;) {
        if (m->closed) return m->met;
        // Whether a node will not come is the engine's to say, and it says
        // so without telling us: look again every 100 ms.
        std::vector<std::string> missing;
        for (const auto& n : ring)
            if (std::find(m->arrived.begin(), m->arrived.end(), n) == m->arrived.end() && ctx.node_pending(n))
                missing.push_back(n);
        if (missing.empty()) {
            for (const auto& n : ring)
                if (std::find(m->arrived.begin(), m->arrived.end(), n) != m->arrived.end()) m->met.push_back(n);
            m->closed = true;
            if (auto it = open_.find(key); it != open_.end() && it->second == m) open_.erase(it);
            cv_.notify_all();
            return m->met;
        }
        const std::string now_missing = fmt::format("{}", fmt::join(missing, ", "));
        if (now_missing != last_missing) {
            ctx.progress(fmt::format("waiting for {} to reach the smoke stage (shared ring)", now_missing));
            last_missing = now_missing;
        }
        if (ctx.should_stop()) {
            // Leave the meeting so that the others do not count on this node.
            m->arrived.erase(std::find(m->arrived.begin(), m->arrived.end(), self));
            cv_.notify_all();
            return make_error("smoke", "smoke.ring",
                              fmt::format("the shared smoke ring did not meet: still waiting for {}", now_missing));
        }
        cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
}

Result<std::map<std::string, nlohmann::json>> RingMeeting::exchange(engine::StageContext& ctx,
                                                                    const std::string& topic,
                                                                    const std::vector<std::string>& members,
                                                                    nlohmann::json value) {
    const std::string key = board_key(topic, members);
    const std::string& self = ctx.node().name;
    engine::WorkerPool::BlockingRegion blocking;  // as in meet()
    std::unique_lock<std::mutex> lock(mu_);
    auto& slot = boards_[key];
    if (!slot) slot = std::make_shared<Board>();
    std::shared_ptr<Board> b = slot;
    b->posted[self] = std::move(value);
    cv_.notify_all();
    for (;;) {
        bool waiting = false;
        for (const auto& n : members)
            if (!b->posted.count(n) && ctx.node_pending(n)) waiting = true;
        if (!waiting) {
            auto out = b->posted;
            // The last reader clears the board for the next run.
            if (++b->taken == b->posted.size())
                if (auto it = boards_.find(key); it != boards_.end() && it->second == b) boards_.erase(it);
            return out;
        }
        if (ctx.should_stop())
            return make_error("smoke", "smoke.ring", "the shared smoke ring's nodes did not all report (" + topic + ")");
        cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
}

std::string RingMeeting::board_key(const std::string& topic, const std::vector<std::string>& members) const {
    return fmt::format("{}@{}", topic, fmt::join(members, ","));
}

void RingMeeting::post(engine::StageContext& ctx, const std::string& topic, const std::vector<std::string>& members,
                       nlohmann::json value) {
    const std::string key = board_key(topic, members);
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = boards_[key];
    if (!slot) slot = std::make_shared<Board>();
    std::shared_ptr<Board> b = slot;
    b->posted[ctx.node().name] = std::move(value);
    if (++b->taken == b->posted.size())
        if (auto it = boards_.find(key); it != boards_.end() && it->second == b) boards_.erase(it);
    cv_.notify_all();
}

}  // namespace kiln::smoke
