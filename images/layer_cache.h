// The content-addressed layer cache. A layer's key is the SHA-256 of its
// spec (canonical JSON), the digests of its input files and its parent's
// key, so a change anywhere rebuilds that layer and every one after it.
//
// Layout under the cache dir:
//   index.json              every entry (name, parent, size, times), sorted
//   index.lock              flock guarding index.json updates
//   locks/<key>.lock        flock held while a key is built: a second build
//                           of the same key waits, then finds it cached
//   layers/<key>/           a complete entry: disk.qcow2, meta.json, build.log
//   layers/.tmp-<key>-*     a build in progress; renamed to layers/<key> only
//                           when complete, so a killed build leaves no entry
// Overlays name their parent as "../<parent>/disk.qcow2" (relative), so the
// cache may move as a whole.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::images {

// The key of one layer. `input_digests`: file name or input -> sha256 hex.
std::string layer_key(const nlohmann::json& spec, const std::map<std::string, std::string>& input_digests,
                      const std::string& parent_key);

struct CacheEntry {
    std::string key;
    std::string name;       // layer name
    std::string parent;     // parent key ("" for a base)
    int64_t created = 0;    // unix seconds
    int64_t last_used = 0;  // unix seconds
    uint64_t size_bytes = 0;
    nlohmann::json meta;  // what the builder stored (manifest, kernel, ...)
};

// A held per-key lock (flock on locks/<key>.lock); released on destruction.
class KeyLock {
public:
    KeyLock() = default;
    explicit KeyLock(int fd) : fd_(fd) {}
    KeyLock(KeyLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    KeyLock& operator=(KeyLock&& o) noexcept;
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;
    ~KeyLock();
    bool held() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

struct PruneReport {
    std::vector<std::string> removed;  // keys
    uint64_t freed_bytes = 0;
    uint64_t kept_bytes = 0;
};

class LayerCache {
public:
    explicit LayerCache(std::string dir) : dir_(std::move(dir)) {}
    // Creates the folders when missing.
    Status open();

    const std::string& dir() const { return dir_; }
    std::string entry_dir(const std::string& key) const;
    std::string disk_path(const std::string& key) const;    // layers/<key>/disk.qcow2
    std::string backing_ref(const std::string& key) const;  // "../<key>/disk.qcow2"

    // A complete entry, or nullopt (an entry dir without meta.json is not one).
    std::optional<CacheEntry> find(const std::string& key) const;

    // Blocks until this process holds the key's lock. With `wait` false,
    // returns an unheld lock when another holds it.
    Result<KeyLock> lock(const std::string& key, bool wait = true);

    // A fresh staging dir for `key` (the caller holds its lock); stale ones
    // for the same key, left by killed builds, are removed first.
    Result<std::string> stage(const std::string& key);
    // Writes meta.json into the staging dir, then renames it into place and
    // records the entry in the index.
    Result<CacheEntry> commit(const std::string& staging, const std::string& key, const std::string& name,
                              const std::string& parent, const nlohmann::json& meta);
    void discard(const std::string& staging);

    // Records a use (for pruning by age).
    void touch(const std::string& key);

    // Every complete entry, from the index (rebuilt from the entry dirs when
    // missing or stale), sorted by key.
    std::vector<CacheEntry> list() const;

    // Removes entries unused for longer than `max_age` (when set), then the
    // least recently used until the cache is under `max_bytes` (when set).
    // Removing an entry removes every entry built on it. Entries whose lock
    // is held by a running build are kept.
    Result<PruneReport> prune(std::optional<std::chrono::seconds> max_age, std::optional<uint64_t> max_bytes,
                              int64_t now_unix);

private:
    Status update_index(const std::function<void(nlohmann::json&)>& edit) const;
    nlohmann::json read_index() const;
    std::string dir_;
};

int64_t unix_now();

}  // namespace kiln::images
