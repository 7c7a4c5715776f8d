#include "images/layer_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "provisioner/core/sha256.h"

namespace kiln::images {

namespace fs = std::filesystem;

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string layer_key(const nlohmann::json& spec, const std::map<std::string, std::string>& input_digests,
                      const std::string& parent_key) {
    // nlohmann::json keeps object keys sorted: dump() is canonical.
    nlohmann::json j = {{"kiln_layer_format", 1}, {"spec", spec}, {"inputs", input_digests}, {"parent", parent_key}};
    return sha256_hex(j.dump());
}

KeyLock& KeyLock::operator=(KeyLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

KeyLock::~KeyLock() {
    if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

namespace {

Error cache_error(const std::string& code, const std::string& msg) {
    return make_error("image", code, msg);
}

uint64_t tree_bytes(const fs::path& dir) {
    uint64_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
            total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    return total;
}

Status write_file_atomic(const fs::path& path, const std::string& data) {
    static std::atomic<int> seq{0};
    const fs::path tmp = path.string() + fmt::format(".tmp-{}-{}", ::getpid(), seq++);
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << data;
        out.flush();
        if (!out) return cache_error("image.cache_write", "cannot write " + tmp.string());
    }
    int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) return cache_error("image.cache_write", "cannot rename " + tmp.string() + ": " + ec.message());
    return ok_status();
}

std::optional<nlohmann::json> read_json(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
}

bool is_key(const std::string& s) {
    return s.size() == 64 &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Flock on a path; the fd closes (and unlocks) with the KeyLock.
Result<KeyLock> flock_path(const std::string& path, bool wait) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return cache_error("image.cache_lock", fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    int rc;
    do {
        rc = ::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        const int err = errno;
        ::close(fd);
        if (err == EWOULDBLOCK) return KeyLock{};
        return cache_error("image.cache_lock", fmt::format("cannot lock {}: {}", path, std::strerror(err)));
    }
    return KeyLock{fd};
}

}  // namespace

Status LayerCache::open() {
    std::error_code ec;
    fs::create_directories(fs::path(dir_) / "layers", ec);
    if (!ec) fs::create_directories(fs::path(dir_) / "locks", ec);
    if (ec)
        return cache_error("image.cache_dir", fmt::format("cannot create the cache dir {}: {}", dir_, ec.message()));
    dir_ = fs::absolute(dir_).lexically_normal().string();
    return ok_status();
}

std::string LayerCache::entry_dir(const std::string& key) const {
    return (fs::path(dir_) / "layers" / key).string();
}
std::string LayerCache::disk_path(const std::string& key) const {
    return (fs::path(entry_dir(key)) / "disk.qcow2").string();
}
std::string LayerCache::backing_ref(const std::string& key) const {
    return "../" + key + "/disk.qcow2";
}

std::optional<CacheEntry> LayerCache::find(const std::string& key) const {
    auto meta = read_json(fs::path(entry_dir(key)) / "meta.json");
    if (!meta || !meta->is_object()) return std::nullopt;
    std::error_code ec;
    if (!fs::exists(disk_path(key), ec)) return std::nullopt;
    CacheEntry e;
    e.key = key;
    e.name = meta->value("name", "");
    e.parent = meta->value("parent", "");
    e.created = meta->value("created", int64_t{0});
    e.last_used = e.created;
    e.meta = meta->value("meta", nlohmann::json::object());
    auto index = read_index();
    if (index.contains(key)) e.last_used = index[key].value("last_used", e.created);
    e.size_bytes = tree_bytes(entry_dir(key));
    return e;
}

Result<KeyLock> LayerCache::lock(const std::string& key, bool wait) {
    return flock_path((fs::path(dir_) / "locks" / (key + ".lock")).string(), wait);
}

Result<std::string> LayerCache::stage(const std::string& key) {
    std::error_code ec;
    const std::string prefix = ".tmp-" + key + "-";
    for (const auto& e : fs::directory_iterator(fs::path(dir_) / "layers", ec))
        if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
    static std::atomic<int> seq{0};
    const fs::path staging = fs::path(dir_) / "layers" / fmt::format("{}{}-{}", prefix, ::getpid(), seq++);
    fs::create_directories(staging, ec);
    if (ec)
        return cache_error("image.cache_write", fmt::format("cannot create {}: {}", staging.string(), ec.message()));
    return staging.string();
}

Result<CacheEntry> LayerCache::commit(const std::string& staging, const std::string& key, const std::string& name,
                                      const std::string& parent, const nlohmann::json& meta) {
    const int64_t now = unix_now();
    nlohmann::json m = {{"key", key}, {"name", name}, {"parent", parent}, {"created", now}, {"meta", meta}};
    if (auto st = write_file_atomic(fs::path(staging) / "meta.json", m.dump(2) + "\n"); !st) return st.error();
    // fsync the disk before the rename makes the entry visible.
    for (const char* f : {"disk.qcow2"}) {
        int fd = ::open((fs::path(staging) / f).c_str(), O_RDONLY);
        if (fd >= 0) {
            ::fsync(fd);
            ::close(fd);
        }
    }
    std::error_code ec;
    const fs::path final_dir = entry_dir(key);
    if (fs::exists(final_dir, ec)) fs::remove_all(final_dir, ec);  // an incomplete leftover (no meta.json)
    fs::rename(staging, final_dir, ec);
    if (ec) return cache_error("image.cache_write", fmt::format("cannot commit {}: {}", key, ec.message()));
    CacheEntry e;
    e.key = key;
    e.name = name;
    e.parent = parent;
    e.created = e.last_used = now;
    e.meta = meta;
    e.size_bytes = tree_bytes(final_dir);
    (void)update_index([&](nlohmann::json& idx) {
        idx[key] = {
            {"name", name}, {"parent", parent}, {"created", now}, {"last_used", now}, {"size_bytes", e.size_bytes}};
    });
    return e;
}

void LayerCache::discard(const std::string& staging) {
    std::error_code ec;
    fs::remove_all(staging, ec);
}

void LayerCache::touch(const std::string& key) {
    const int64_t now = unix_now();
    (void)update_index([&](nlohmann::json& idx) {
        if (idx.contains(key)) idx[key]["last_used"] = now;
    });
}

nlohmann::json LayerCache::read_index() const {
    auto j = read_json(fs::path(dir_) / "index.json");
    if (!j || !j->is_object() || !j->contains("entries") || !(*j)["entries"].is_object())
        return nlohmann::json::object();
    return (*j)["entries"];
}

Status LayerCache::update_index(const std::function<void(nlohmann::json&)>& edit) const {
    auto lk = flock_path((fs::path(dir_) / "index.lock").string(), true);
    if (!lk) return lk.error();
    nlohmann::json idx = read_index();
    // Reconcile with the entry dirs: they are the truth, the index a summary.
    std::error_code ec;
    std::set<std::string> present;
    for (const auto& e : fs::directory_iterator(fs::path(dir_) / "layers", ec)) {
        const std::string k = e.path().filename().string();
        if (is_key(k) && fs::exists(e.path() / "meta.json")) present.insert(k);
    }
    for (auto it = idx.begin(); it != idx.end();) {
        if (!present.count(it.key()))
            it = idx.erase(it);
        else
            ++it;
    }
    for (const auto& k : present) {
        if (idx.contains(k)) continue;
        auto m = read_json(fs::path(entry_dir(k)) / "meta.json");
        if (!m) continue;
        idx[k] = {{"name", m->value("name", "")},
                  {"parent", m->value("parent", "")},
                  {"created", m->value("created", int64_t{0})},
                  {"last_used", m->value("created", int64_t{0})},
                  {"size_bytes", tree_bytes(entry_dir(k))}};
    }
    edit(idx);
    return write_file_atomic(fs::path(dir_) / "index.json", nlohmann::json{{"entries", idx}}.dump(2) + "\n");
}

std::vector<CacheEntry> LayerCache::list() const {
    (void)update_index([](nlohmann::json&) {});
    std::vector<CacheEntry> out;
    const nlohmann::json index = read_index();
    for (auto it = index.begin(); it != index.end(); ++it) {
        const std::string& k = it.key();
        const nlohmann::json& v = it.value();
        CacheEntry e;
        e.key = k;
        e.name = v.value("name", "");
        e.parent = v.value("parent", "");
        e.created = v.value("created", int64_t{0});
        e.last_used = v.value("last_used", e.created);
        e.size_bytes = v.value("size_bytes", uint64_t{0});
        out.push_back(std::move(e));
    }
    return out;  // json objects iterate in key order
}

Result<PruneReport> LayerCache::prune(std::optional<std::chrono::seconds> max_age, std::optional<uint64_t> max_bytes,
                                      int64_t now_unix) {
    PruneReport report;
    auto entries = list();
    std::map<std::string, CacheEntry> by_key;
    for (auto& e : entries) by_key[e.key] = e;
    std::set<std::string> doomed;
    // An entry and everything built on it.
    std::function<void(const std::string&)> doom = [&](const std::string& key) {
        if (!doomed.insert(key).second) return;
        for (const auto& [k, e] : by_key)
            if (e.parent == key) doom(k);
    };
    if (max_age)
        for (const auto& [k, e] : by_key)
            if (now_unix - e.last_used > max_age->count()) doom(k);
    if (max_bytes) {
        auto live_bytes = [&] {
            uint64_t t = 0;
            for (const auto& [k, e] : by_key)
                if (!doomed.count(k)) t += e.size_bytes;
            return t;
        };
        std::vector<CacheEntry> lru;
        for (const auto& [k, e] : by_key) lru.push_back(e);
        std::sort(lru.begin(), lru.end(), [](const auto& a, const auto& b) {
            return std::tie(a.last_used, a.key) < std::tie(b.last_used, b.key);
        });
        for (const auto& e : lru) {
            if (live_bytes() <= *max_bytes) break;
            doom(e.key);
        }
    }
    // Keep what a running build holds (its lock is taken), and the
    // ancestors of whatever is kept.
    std::map<std::string, KeyLock> ours;
    for (const auto& k : doomed) {
        auto lk = lock(k, false);
        if (!lk) return lk.error();
        if (lk->held()) ours.emplace(k, std::move(*lk));
    }
    std::set<std::string> keep;
    for (const auto& [k, e] : by_key)
        if (!doomed.count(k) || !ours.count(k)) {
            for (std::string a = k; !a.empty() && by_key.count(a); a = by_key[a].parent) keep.insert(a);
        }
    for (const auto& [k, e] : by_key) {
        if (keep.count(k) || !ours.count(k)) {
            report.kept_bytes += e.size_bytes;
            continue;
        }
        std::error_code ec;
        // Rename first so a reader never sees a half-removed entry.
        const fs::path gone = fs::path(dir_) / "layers" / (".tmp-" + k + "-prune");
        fs::rename(entry_dir(k), gone, ec);
        if (ec) return cache_error("image.cache_prune", fmt::format("cannot remove {}: {}", k, ec.message()));
        fs::remove_all(gone, ec);
        report.removed.push_back(k);
        report.freed_bytes += e.size_bytes;
    }
    // Staging dirs of builds that died (their key is not locked).
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(fs::path(dir_) / "layers", ec)) {
        const std::string n = d.path().filename().string();
        if (n.rfind(".tmp-", 0) != 0 || n.size() < 5 + 64) continue;
        auto lk = lock(n.substr(5, 64), false);
        if (lk && lk->held()) fs::remove_all(d.path(), ec);
    }
    (void)update_index([](nlohmann::json&) {});
    std::sort(report.removed.begin(), report.removed.end());
    return report;
}

}  // namespace kiln::images
