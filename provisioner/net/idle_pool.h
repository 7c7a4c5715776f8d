// Idle things kept for reuse, by key, process-wide: the HTTP client keeps
// its idle libcurl handles here (each holding at most one open connection),
// keyed by destination and TLS settings, so a node that parks and resumes on
// another thread still finds its BMC's connection.
//
// take and put are O(1) under one short lock: per key a list, newest first;
// across keys one LRU list, newest first. Within a key, recency order is
// the global order, so the globally least recently put item is always the
// oldest of its key: eviction takes the LRU's tail and its key's tail.
// Evicted items are handed back to the caller, to be destroyed outside the
// lock (closing a connection is a system call, maybe a TLS close_notify).
// libcurl's own shared connection cache (CURLSH) was measured worse at
// 5,000 BMCs: it walks the whole cache to evict once full.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::net {

template <class T>
class IdlePool {
public:
    // At most `per_key` idle items per key: a switch that many nodes talk
    // to at once does not take the whole budget.
    explicit IdlePool(size_t per_key) : per_key_(per_key < 1 ? 1 : per_key) {}
    IdlePool(const IdlePool&) = delete;
    IdlePool& operator=(const IdlePool&) = delete;

    // The most recently put item of `key`, taken out; nullopt when none.
    std::optional<T> take(const std::string& key) {
        std::lock_guard lock(mu_);
        auto it = buckets_.find(key);
        if (it == buckets_.end()) return std::nullopt;
        Bucket& bucket = it->second;
        Slot slot = std::move(bucket.slots.front());
        bucket.slots.pop_front();
        lru_.erase(slot.in_lru);
        if (bucket.slots.empty()) buckets_.erase(it);
        return std::move(slot.item);
    }

    // Keeps `item` as `key`'s newest, then drops the oldest of `key` past
    // per_key and the least recently put items past `capacity` (0 keeps
    // nothing). Returns what was dropped, `item` itself when capacity is 0.
    [[nodiscard]] std::vector<T> put(const std::string& key, T item, size_t capacity) {
        std::vector<T> dropped;
        if (capacity == 0) {
            dropped.push_back(std::move(item));
            std::lock_guard lock(mu_);
            while (!lru_.empty()) dropped.push_back(evict_lru());
            return dropped;
        }
        std::lock_guard lock(mu_);
        auto [it, fresh] = buckets_.try_emplace(key);
        Bucket& bucket = it->second;
        if (fresh) bucket.key = &it->first;  // node-based map: stable until erased
        lru_.push_front(&bucket);
        bucket.slots.push_front(Slot{std::move(item), lru_.begin()});
        if (bucket.slots.size() > per_key_) {
            Slot& oldest = bucket.slots.back();
            lru_.erase(oldest.in_lru);
            dropped.push_back(std::move(oldest.item));
            bucket.slots.pop_back();
        }
        while (lru_.size() > capacity) dropped.push_back(evict_lru());
        return dropped;
    }

    size_t size() const {
        std::lock_guard lock(mu_);
        return lru_.size();
    }

private:
    struct Bucket;
    struct Slot {
        T item;
        typename std::list<Bucket*>::iterator in_lru;
    };
    struct Bucket {
        const std::string* key = nullptr;
        std::list<Slot> slots;  // newest first
    };

    // The least recently put item: the oldest of its key. Lock held.
    T evict_lru() {
        Bucket* bucket = lru_.back();
        lru_.pop_back();
        T item = std::move(bucket->slots.back().item);
        bucket->slots.pop_back();
        if (bucket->slots.empty()) buckets_.erase(buckets_.find(*bucket->key));
        return item;
    }

    const size_t per_key_;
    mutable std::mutex mu_;
    std::unordered_map<std::string, Bucket> buckets_;
    std::list<Bucket*> lru_;  // one entry per idle item, newest first
};

}  // namespace kiln::net
