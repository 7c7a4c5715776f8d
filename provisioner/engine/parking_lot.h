// Where parked waits sit while they hold no thread (StageContext::park): a
// min-heap of wake-up times, plus event keys another thread can signal
// (StageContext::wake). Pure bookkeeping, no threads and no lock: the
// engine calls it under its own mutex, and its dispatcher sleeps until
// next_due().
//
// Each entry is a node index. A node is parked at most once at a time;
// parking it again replaces its earlier entry. Stale heap entries (a node
// woken early by its key) are skipped by a generation count, so wake() and
// take_due() cost O(log n) per entry, never a scan of every parked node.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::engine {

class ParkingLot {
public:
    using Clock = std::chrono::steady_clock;

    // Parks `node` until `wake_at`, or until wake(key) when key is not "".
    void park(size_t node, Clock::time_point wake_at, const std::string& key = "");
    // Makes every node parked on `key` due now. Returns how many.
    size_t wake(const std::string& key);
    // Makes every parked node due now (a stop).
    void wake_all();
    // Removes and returns the nodes due at `now`, earliest first.
    std::vector<size_t> take_due(Clock::time_point now);
    // The earliest wake-up time, if any node is parked.
    std::optional<Clock::time_point> next_due();
    size_t size() const { return parked_.size(); }
    bool empty() const { return parked_.empty(); }

private:
    struct Entry {
        Clock::time_point at;
        uint64_t seq;  // FIFO among equal times
        size_t node;
        uint64_t gen;
        bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
    };
    struct Slot {
        uint64_t gen;
        std::string key;
    };
    void drop_stale();

    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
    std::unordered_map<size_t, Slot> parked_;
    std::unordered_map<std::string, std::vector<std::pair<size_t, uint64_t>>> by_key_;
    uint64_t seq_ = 0;
    uint64_t gen_ = 0;
};

}  // namespace kiln::engine
