#include "provisioner/engine/exclusive_locks.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "provisioner/engine/worker_pool.h"
#include "provisioner/journal/leases.h"

namespace kiln::engine {
namespace {

// One mutex per name for the whole process: every engine and every
// hand-built context share it. Names are few (switches), never erased.
std::shared_ptr<std::timed_mutex> local_mutex(const std::string& key) {
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<std::timed_mutex>> table;
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = table[key];
    if (!slot) slot = std::make_shared<std::timed_mutex>();
    return slot;
}

class ExclusiveHold final : public StageContext::Hold {
public:
    ExclusiveHold(std::shared_ptr<std::timed_mutex> local, journal::Leases* leases, std::string key)
        : local_(std::move(local)), leases_(leases), key_(std::move(key)) {}
    ~ExclusiveHold() override {
        // A release that fails leaves the row to the stage's end, which
        // gives back every slot the node holds, or to its lease's expiry.
        if (leases_) (void)leases_->release_lock(key_);
        local_->unlock();
    }

private:
    std::shared_ptr<std::timed_mutex> local_;
    journal::Leases* leases_;
    std::string key_;
};

Error timed_out(const StageContext& ctx, const std::string& key, const std::string& holder) {
    return make_error(
        "engine", "exclusive.timeout",
        fmt::format("{} waiting for {} (held by {})", ctx.deadline_passed() ? "timed out" : "stopped", key, holder));
}

}  // namespace

Result<std::unique_ptr<StageContext::Hold>> ExclusiveLocks::acquire(const StageContext& ctx,
                                                                    const std::string& key) const {
    auto local = local_mutex(key);
    if (!local->try_lock()) {
        // The pool may start another thread while this one waits.
        WorkerPool::BlockingRegion blocking;
        while (!local->try_lock_for(std::chrono::milliseconds(100)))
            if (ctx.should_stop()) return timed_out(ctx, key, "another node of this process");
    }
    if (!leases_) return std::unique_ptr<StageContext::Hold>(new ExclusiveHold(local, nullptr, key));
    // Another worker's hold lasts one switch change: poll with a short
    // backoff rather than queue in the database.
    std::chrono::milliseconds backoff(25);
    for (;;) {
        auto taken = leases_->take_lock(key, ctx.node().name, ttl_);
        if (!taken) {
            local->unlock();
            return taken.error();
        }
        if (!*taken) return std::unique_ptr<StageContext::Hold>(new ExclusiveHold(local, leases_, key));
        if (!ctx.wait_for(backoff)) {
            local->unlock();
            return timed_out(ctx, key, **taken);
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
}

}  // namespace kiln::engine
