// Stop requests for a run. A soft stop (first SIGINT/SIGTERM) lets in-flight
// actions finish and starts nothing new; a hard stop (second signal) also
// cuts waits short. Async-signal-safe to request; waiters are woken by a
// watcher thread, not from the handler.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

namespace kiln::engine {

class StopToken {
public:
    using Clock = std::chrono::steady_clock;

    void request_soft() {
        level_.store(std::max(level_.load(), 1));
        notify();
    }
    void request_hard() {
        level_.store(2);
        notify();
    }
    bool soft() const { return level_.load() >= 1; }
    bool hard() const { return level_.load() >= 2; }

    // Raw level, for a signal handler: set and let a watcher call notify().
    std::atomic<int>& level() { return level_; }
    void notify() {
        std::vector<std::function<void()>> listeners;
        {
            std::lock_guard<std::mutex> lock(mu_);
            cv_.notify_all();
            listeners = listeners_;
        }
        for (auto& fn : listeners) fn();
    }
    // Called (from the notifying thread) on every stop request: lets the
    // engine wake its dispatcher.
    void add_listener(std::function<void()> fn) {
        std::lock_guard<std::mutex> lock(mu_);
        listeners_.push_back(std::move(fn));
    }
    void clear_listeners() {
        std::lock_guard<std::mutex> lock(mu_);
        listeners_.clear();
    }

    // Waits up to d (or until `deadline`); false when cut short by a hard stop
    // or the deadline.
    bool wait_for(std::chrono::milliseconds d, Clock::time_point deadline) const {
        auto until = Clock::now() + d;
        bool by_deadline = deadline < until;
        if (by_deadline) until = deadline;
        std::unique_lock<std::mutex> lock(mu_);
        bool stopped = cv_.wait_until(lock, until, [&] { return hard(); });
        if (stopped) return false;
        return !by_deadline;
    }

private:
    std::atomic<int> level_{0};
    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    std::vector<std::function<void()>> listeners_;
};

}  // namespace kiln::engine
