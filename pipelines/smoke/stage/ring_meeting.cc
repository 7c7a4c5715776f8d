#include "pipelines/smoke/stage/ring_meeting.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "provisioner/engine/worker_pool.h"

namespace kiln::smoke {

std::string RingMeeting::wake_key(const std::vector<std::string>& ring) {
    return fmt::format("smoke-ring:{}", fmt::join(ring, ","));
}

std::optional<std::vector<std::string>> RingMeeting::close_if_met(engine::StageContext& ctx, const std::string& key,
                                                                  const std::shared_ptr<Meeting>& m,
                                                                  const std::vector<std::string>& ring,
                                                                  std::string* missing) {
    if (m->closed) return m->met;
    const std::string& self = ctx.node().name;
    auto arrived = [&](const std::string& n) {
        return std::find(m->arrived.begin(), m->arrived.end(), n) != m->arrived.end();
    };
    // Whether a node will not come is the engine's to say, and it says so
    // without telling us: the waiting look again.
    std::vector<std::string> absent;
    for (const auto& n : ring)
        if (!arrived(n) && ctx.node_pending(n)) absent.push_back(n);
    if (!absent.empty()) {
        *missing = fmt::format("{}", fmt::join(absent, ", "));
        return std::nullopt;
    }
    // A node whose parked wait ended (deadline, stop) arrived but cannot go on.
    for (const auto& n : ring)
        if (arrived(n) && (n == self || ctx.node_pending(n))) m->met.push_back(n);
    m->closed = true;
    if (auto it = open_.find(key); it != open_.end() && it->second == m) open_.erase(it);
    cv_.notify_all();
    return m->met;
}

Result<std::vector<std::string>> RingMeeting::meet(engine::StageContext& ctx, const std::vector<std::string>& ring) {
    const std::string key = fmt::format("{}", fmt::join(ring, ","));
    const std::string& self = ctx.node().name;
    // Holds this thread until the ring meets: the engine's pool starts
    // another, so the peers still queued can come (a ring larger than the
    // pool's core would otherwise never meet). Under the engine, arrive().
    engine::WorkerPool::BlockingRegion blocking;
    std::unique_lock<std::mutex> lock(mu_);
    auto& slot = open_[key];
    if (!slot) slot = std::make_shared<Meeting>();
    std::shared_ptr<Meeting> m = slot;
    m->arrived.push_back(self);
    cv_.notify_all();
    std::string last_missing;
    for (;;) {
        std::string now_missing;
        if (auto met = close_if_met(ctx, key, m, ring, &now_missing)) return *met;
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

Result<std::optional<std::vector<std::string>>> RingMeeting::arrive(engine::StageContext& ctx,
                                                                    const std::vector<std::string>& ring,
                                                                    std::string* waiting) {
    const std::string key = fmt::format("{}", fmt::join(ring, ","));
    const std::string& self = ctx.node().name;
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Meeting> m;
    if (auto j = joined_.find(self); j != joined_.end()) {
        if (ctx.resumed()) {
            m = j->second;
        } else {
            // An arrival of an earlier run whose wait ended: it is not here now.
            auto& before = j->second->arrived;
            before.erase(std::remove(before.begin(), before.end(), self), before.end());
            joined_.erase(j);
        }
    }
    if (!m) {
        auto& slot = open_[key];
        if (!slot) slot = std::make_shared<Meeting>();
        m = slot;
        m->arrived.push_back(self);
    }
    const bool was_closed = m->closed;
    auto met = close_if_met(ctx, key, m, ring, waiting);
    if (!met) {
        joined_[self] = m;
        return std::optional<std::vector<std::string>>();
    }
    joined_.erase(self);
    lock.unlock();
    if (!was_closed) ctx.wake(wake_key(ring));  // this call closed it: the parked go on
    return std::optional<std::vector<std::string>>(std::move(*met));
}

std::string RingMeeting::board_key(const std::string& topic, const std::vector<std::string>& members) {
    return fmt::format("{}@{}", topic, fmt::join(members, ","));
}

std::string RingMeeting::board_wake_key(const std::string& topic, const std::vector<std::string>& members) {
    return "smoke-board:" + board_key(topic, members);
}

std::shared_ptr<RingMeeting::Board> RingMeeting::board(const std::string& topic,
                                                       const std::vector<std::string>& members) {
    auto& slot = boards_[board_key(topic, members)];
    if (!slot) {
        slot = std::make_shared<Board>();
        slot->members = members;
    }
    return slot;
}

std::optional<std::map<std::string, nlohmann::json>> RingMeeting::take_if_complete(engine::StageContext& ctx,
                                                                                   const std::string& key,
                                                                                   const std::shared_ptr<Board>& b,
                                                                                   std::string* missing) {
    std::vector<std::string> absent;
    for (const auto& n : b->members)
        if (!b->posted.count(n) && ctx.node_pending(n)) absent.push_back(n);
    if (!absent.empty()) {
        *missing = fmt::format("{}", fmt::join(absent, ", "));
        return std::nullopt;
    }
    auto out = b->posted;
    // The last reader clears the board for the next run.
    if (++b->taken == b->posted.size())
        if (auto it = boards_.find(key); it != boards_.end() && it->second == b) boards_.erase(it);
    return out;
}

Result<std::map<std::string, nlohmann::json>> RingMeeting::exchange(engine::StageContext& ctx, const std::string& topic,
                                                                    const std::vector<std::string>& members,
                                                                    nlohmann::json value) {
    const std::string key = board_key(topic, members);
    engine::WorkerPool::BlockingRegion blocking;  // as in meet()
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Board> b = board(topic, members);
    b->posted[ctx.node().name] = std::move(value);
    cv_.notify_all();
    for (;;) {
        std::string missing;
        if (auto out = take_if_complete(ctx, key, b, &missing)) return std::move(*out);
        if (ctx.should_stop())
            return make_error("smoke", "smoke.ring",
                              "the shared smoke ring's nodes did not all report (" + topic + ")");
        cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
}

Result<std::optional<std::map<std::string, nlohmann::json>>> RingMeeting::gather(
    engine::StageContext& ctx, const std::string& topic, const std::vector<std::string>& members,
    std::optional<nlohmann::json> value, std::string* waiting) {
    const std::string key = board_key(topic, members);
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Board> b = board(topic, members);
    const bool posting = value.has_value();
    if (posting) {
        b->posted[ctx.node().name] = std::move(*value);
        cv_.notify_all();  // a blocking exchange() of the same board
    }
    auto out = take_if_complete(ctx, key, b, waiting);
    lock.unlock();
    if (!out) return std::optional<std::map<std::string, nlohmann::json>>();
    if (posting) ctx.wake(board_wake_key(topic, members));  // this post completed it: the parked go on
    return std::optional<std::map<std::string, nlohmann::json>>(std::move(*out));
}

void RingMeeting::post(engine::StageContext& ctx, const std::string& topic, const std::vector<std::string>& members,
                       nlohmann::json value) {
    const std::string key = board_key(topic, members);
    {
        std::lock_guard<std::mutex> lock(mu_);
        std::shared_ptr<Board> b = board(topic, members);
        b->posted[ctx.node().name] = std::move(value);
        if (++b->taken == b->posted.size())
            if (auto it = boards_.find(key); it != boards_.end() && it->second == b) boards_.erase(it);
        cv_.notify_all();
    }
    ctx.wake(board_wake_key(topic, members));  // those parked on it look again
}

void RingMeeting::forget(const std::vector<std::string>& nodes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto names = [&](const std::vector<std::string>& list) {
        return std::any_of(list.begin(), list.end(), [&](const std::string& n) {
            return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
        });
    };
    for (auto it = boards_.begin(); it != boards_.end();)
        it = names(it->second->members) ? boards_.erase(it) : std::next(it);
    for (auto it = open_.begin(); it != open_.end();) it = names(it->second->arrived) ? open_.erase(it) : std::next(it);
    for (const auto& n : nodes) joined_.erase(n);
}

}  // namespace kiln::smoke
