#include "firmware/bmc/session_table.h"

#include <openssl/rand.h>

namespace kiln::bmc {

std::string random_hex(size_t bytes) {
    std::string raw(bytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
        // Without randomness a token is guessable; no session is better.
        return {};
    }
    static const char* kDigits = "0123456789abcdef";
    std::string out;
    out.reserve(bytes * 2);
    for (unsigned char c : raw) {
        out += kDigits[c >> 4];
        out += kDigits[c & 0xf];
    }
    return out;
}

SessionTable::SessionTable(size_t limit, std::chrono::seconds idle_timeout, SteadyClock clock)
    : limit_(limit), idle_timeout_(idle_timeout), clock_(std::move(clock)) {
    if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

void SessionTable::expire() {
    const auto now = clock_();
    for (auto it = by_id_.begin(); it != by_id_.end();) {
        if (now - it->second.last_used >= idle_timeout_) {
            id_by_token_.erase(it->second.token);
            it = by_id_.erase(it);
        } else {
            ++it;
        }
    }
}

Result<Session> SessionTable::create(const std::string& user) {
    expire();
    if (by_id_.size() >= limit_) {
        return make_error("bmc", "bmc.session_limit",
                          "the maximum number of sessions (" + std::to_string(limit_) + ") is reached", true);
    }
    Session s;
    s.id = random_hex(8);
    s.token = random_hex(16);
    if (s.id.empty() || s.token.empty()) {
        return make_error("bmc", "bmc.no_randomness", "cannot draw random bytes for a session token");
    }
    s.user = user;
    s.last_used = clock_();
    id_by_token_[s.token] = s.id;
    by_id_[s.id] = s;
    return s;
}

std::optional<Session> SessionTable::use_token(const std::string& token) {
    expire();
    auto it = id_by_token_.find(token);
    if (it == id_by_token_.end()) return std::nullopt;
    Session& s = by_id_.at(it->second);
    s.last_used = clock_();
    return s;
}

std::optional<Session> SessionTable::find_id(const std::string& id) {
    expire();
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second;
}

bool SessionTable::remove_id(const std::string& id) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return false;
    id_by_token_.erase(it->second.token);
    by_id_.erase(it);
    return true;
}

void SessionTable::clear() {
    by_id_.clear();
    id_by_token_.clear();
}

std::vector<Session> SessionTable::list() {
    expire();
    std::vector<Session> out;
    for (const auto& [id, s] : by_id_) out.push_back(s);
    return out;
}

}  // namespace kiln::bmc
