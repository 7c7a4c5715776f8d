// Redfish sessions of one emulated BMC: X-Auth-Token -> session, with a cap
// (real BMCs hold only a few: iDRAC answers 503 RAC0218 past it) and an idle
// timeout (SessionService.SessionTimeout). Sessions live in memory only:
// a BMC restart drops them, as a real one does, so clients meet the 401 they
// must handle by logging in again.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::bmc {

using SteadyClock = std::function<std::chrono::steady_clock::time_point()>;

struct Session {
    std::string id;     // the last segment of its URI
    std::string token;  // X-Auth-Token
    std::string user;
    std::chrono::steady_clock::time_point last_used;
};

class SessionTable {
public:
    SessionTable(size_t limit, std::chrono::seconds idle_timeout, SteadyClock clock);

    // Error "bmc.session_limit" when `limit` sessions are open.
    Result<Session> create(const std::string& user);
    // Finds a live session and marks it used now.
    std::optional<Session> use_token(const std::string& token);
    std::optional<Session> find_id(const std::string& id);
    bool remove_id(const std::string& id);
    std::vector<Session> list();  // by id

    size_t limit() const { return limit_; }
    void set_limit(size_t limit) { limit_ = limit; }
    void clear();  // a BMC restart: every token stops working
    std::chrono::seconds idle_timeout() const { return idle_timeout_; }

private:
    void expire();

    size_t limit_;
    std::chrono::seconds idle_timeout_;
    SteadyClock clock_;
    std::map<std::string, Session> by_id_;
    std::map<std::string, std::string> id_by_token_;
};

// Hex of `bytes` random bytes from OpenSSL's CSPRNG.
std::string random_hex(size_t bytes);

}  // namespace kiln::bmc
