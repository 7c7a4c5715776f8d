#include "provisioner/engine/parking_lot.h"

namespace kiln::engine {

void ParkingLot::park(size_t node, Clock::time_point wake_at, const std::string& key) {
    const uint64_t gen = ++gen_;
    parked_[node] = Slot{gen, key};
    heap_.push({wake_at, ++seq_, node, gen});
    if (!key.empty()) by_key_[key].emplace_back(node, gen);
}

size_t ParkingLot::wake(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return 0;
    size_t n = 0;
    const auto now = Clock::now();
    for (const auto& [node, gen] : it->second) {
        auto p = parked_.find(node);
        if (p == parked_.end() || p->second.gen != gen) continue;  // resumed or parked again since
        // A fresh entry due now; the old timed one goes stale.
        p->second.gen = ++gen_;
        heap_.push({now, ++seq_, node, p->second.gen});
        ++n;
    }
    by_key_.erase(it);
    return n;
}

void ParkingLot::wake_all() {
    const auto now = Clock::now();
    for (auto& [node, slot] : parked_) {
        slot.gen = ++gen_;
        heap_.push({now, ++seq_, node, slot.gen});
    }
    by_key_.clear();
}

void ParkingLot::drop_stale() {
    while (!heap_.empty()) {
        const Entry& top = heap_.top();
        auto p = parked_.find(top.node);
        if (p != parked_.end() && p->second.gen == top.gen) return;
        heap_.pop();
    }
}

std::vector<size_t> ParkingLot::take_due(Clock::time_point now) {
    std::vector<size_t> out;
    for (drop_stale(); !heap_.empty() && heap_.top().at <= now; drop_stale()) {
        const size_t node = heap_.top().node;
        heap_.pop();
        parked_.erase(node);
        out.push_back(node);
    }
    return out;
}

std::optional<ParkingLot::Clock::time_point> ParkingLot::next_due() {
    drop_stale();
    if (heap_.empty()) return std::nullopt;
    return heap_.top().at;
}

}  // namespace kiln::engine
