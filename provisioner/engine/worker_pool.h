// The engine's threads: a core sized to the machine's cores, grown only
// while tasks block. Waits that park (StageContext::park) hold no thread at
// all; waits that still block hold one, so the pool makes up for them:
//   - a task that enters a BlockingRegion (StageContext::wait_for, a smoke
//     ring's meeting) lets the pool start another thread at once when work
//     is queued and fewer than `core` threads are free to run it;
//   - a supervisor adds one thread per tick while work is queued, no thread
//     is idle and no task finished since the previous tick (a stage blocking
//     somewhere the pool cannot see), so such waits cannot starve the run.
// Never more than `max` threads: the engine passes limits.parallel, or
// fewer when the open-file limit covers fewer threads (open_files.h).
// Threads are started on demand and joined on destruction after the queue
// drains.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::engine {

class WorkerPool {
public:
    // The core size for this machine: its cores plus a few for tasks that
    // wait on the journal or the network between parks.
    static int default_core() {
        unsigned hw = std::thread::hardware_concurrency();
        return static_cast<int>(hw == 0 ? 2 : hw) + 4;
    }

    WorkerPool(int core, int max) : core_(std::max(1, core)), max_(std::max(std::max(1, core), max)) {
        if (max_ > core_) supervisor_ = std::thread([this] { supervise(); });
    }
    explicit WorkerPool(int threads) : WorkerPool(threads, threads) {}
    ~WorkerPool() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            closing_ = true;
        }
        cv_.notify_all();
        tick_cv_.notify_all();
        if (supervisor_.joinable()) supervisor_.join();
        // No thread starts once closing_ is set: threads_ is stable here.
        for (auto& t : threads_) t.join();
    }
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    void submit(std::function<void()> task) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            tasks_.push_back(std::move(task));
            // Blocked threads do not count against the core.
            if (idle_ == 0 && static_cast<int>(threads_.size()) - blocked_ < core_) spawn_locked();
        }
        cv_.notify_one();
    }

    // Threads started so far (none retires before the pool ends).
    int threads() const {
        std::lock_guard<std::mutex> lock(mu_);
        return static_cast<int>(threads_.size());
    }

    // Threads the supervisor started past the core in this process, every
    // pool together: a tick with work queued, no thread idle and no task
    // ended (a task blocking where the pool cannot see, or a machine so
    // slow that one task outlasts a tick). Tests tell these from threads
    // held by waits.
    static int64_t stall_threads_started() { return stall_spawns_.load(); }

    // Marks the calling thread, when it is one of a pool's, as blocked in a
    // wait until the region ends. Does nothing on other threads.
    class BlockingRegion {
    public:
        BlockingRegion() : pool_(current_) {
            if (pool_) pool_->blocking_begin();
        }
        ~BlockingRegion() {
            if (pool_) pool_->blocking_end();
        }
        BlockingRegion(const BlockingRegion&) = delete;
        BlockingRegion& operator=(const BlockingRegion&) = delete;

    private:
        WorkerPool* pool_;
    };

private:
    // Whether a thread started.
    bool spawn_locked() {
        if (closing_ || static_cast<int>(threads_.size()) >= max_) return false;
        threads_.emplace_back([this] { loop(); });
        return true;
    }

    void blocking_begin() {
        std::lock_guard<std::mutex> lock(mu_);
        ++blocked_;
        const int runnable = static_cast<int>(threads_.size()) - blocked_;
        if (!tasks_.empty() && idle_ == 0 && runnable < core_) spawn_locked();
    }
    void blocking_end() {
        std::lock_guard<std::mutex> lock(mu_);
        --blocked_;
    }

    void loop() {
        current_ = this;
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock<std::mutex> lock(mu_);
                ++idle_;
                cv_.wait(lock, [&] { return closing_ || !tasks_.empty(); });
                --idle_;
                if (tasks_.empty()) return;  // closing and drained
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            task();
            std::lock_guard<std::mutex> lock(mu_);
            ++finished_;
        }
    }

    void supervise() {
        std::unique_lock<std::mutex> lock(mu_);
        uint64_t seen = finished_;
        while (!closing_) {
            tick_cv_.wait_for(lock, std::chrono::milliseconds(100));
            if (closing_) break;
            if (!tasks_.empty() && idle_ == 0 && finished_ == seen) {
                if (spawn_locked()) ++stall_spawns_;
                cv_.notify_one();
            }
            seen = finished_;
        }
    }

    static inline thread_local WorkerPool* current_ = nullptr;
    static inline std::atomic<int64_t> stall_spawns_{0};

    const int core_;
    const int max_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::condition_variable tick_cv_;
    std::deque<std::function<void()>> tasks_;
    std::vector<std::thread> threads_;
    std::thread supervisor_;
    int idle_ = 0;
    int blocked_ = 0;
    uint64_t finished_ = 0;
    bool closing_ = false;
};

}  // namespace kiln::engine
