// One BMC as kiln talks to it: authentication (a Redfish session, re-login
// once on 401, HTTP Basic where sessions are not offered), retries with
// jittered backoff on connection errors, 5xx and vendor "busy" replies
// (honouring Retry-After), a cap on requests in flight, and logout when the
// last user lets go. Thread-safe: every node-stage execution on this BMC in
// one process shares one BmcSession (see SessionPool), so a BMC sees at most
// one kiln session at a time.
//
// Errors, domain "redfish" (plus the transport's "http.*", see http_client.h):
//   redfish.auth       the BMC refused the credentials
//   redfish.redirect   a 3xx to another host (or a redirected non-GET)
//   redfish.stopped    a wait between retries was cut short (stop, deadline)
//   redfish.status     exhausted retries on a busy BMC (transient)
// No message ever holds the password or the session token.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/redfish_json.h"
#include "provisioner/core/result.h"
#include "provisioner/net/http_client.h"

namespace kiln::redfish {

struct Endpoint {
    std::string url;  // "https://10.0.0.5" or "http://127.0.0.1:8000"; only the origin is used
    std::string user;
    std::string password;  // the resolved value; never printed
    net::TlsOptions tls;
};

struct SessionOptions {
    std::chrono::milliseconds request_timeout{30000};
    std::chrono::milliseconds connect_timeout{10000};
    int max_attempts = 5;  // per request, for transient failures and busy replies
    std::chrono::milliseconds backoff_initial{500};
    std::chrono::milliseconds backoff_max{20000};
    std::chrono::milliseconds max_retry_after{120000};  // a longer Retry-After is cut to this
    int max_in_flight = 4;                              // requests to this BMC at once
    size_t max_response = 16u << 20;
    JsonLimits json;
    // MessageIds (substring match) that mean "busy, try again" whatever the
    // status (vendor profiles add theirs, e.g. Dell's RAC0218 / 409 job busy).
    std::vector<std::string> busy_message_ids = {"ServiceTemporarilyUnavailable", "ServiceInUnknownState",
                                                 "SessionLimitExceeded", "Busy"};
    bool retry_conflict = false;  // 409 is busy (Dell: power-on right after power-off)
};

// Sleeps up to the given time; false when the wait was cut short (a stop or
// a deadline). Stages pass StageContext::wait_for, so stops cut retries.
using Waiter = std::function<bool(std::chrono::milliseconds)>;
Waiter sleeping_waiter();

struct Response {
    long status = 0;
    std::string method;
    std::string uri;  // service-relative path
    std::vector<std::pair<std::string, std::string>> headers;
    std::string raw;      // the body as received
    nlohmann::json body;  // parsed body; null when empty or not JSON
    std::string header(const std::string& name) const;
    std::string etag() const;  // the ETag header, else the body's @odata.etag
    JsonView view() const { return JsonView(body, method + " " + uri); }
    // "Base.1.0.ResourceMissingAtURI, ..." from error / @Message.ExtendedInfo.
    std::string message_ids() const;
    bool ok() const { return status >= 200 && status < 300; }
};

struct RequestSpec {
    std::string method = "GET";
    std::string uri;  // service-relative ("/redfish/v1/...") or same-origin absolute URL
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;  // sent with Content-Type: application/json when not empty
    std::vector<net::MultipartPart> multipart;
    std::chrono::milliseconds timeout{0};  // 0: the session's request_timeout
    // Safe to resend after a failure that may have reached the BMC
    // (timeouts, dropped connections, 5xx). GET/PATCH-with-If-Match/DELETE
    // are; an action POST is not (it is resent only after http.connect or 503).
    bool idempotent = true;
    // Counts every HTTP exchange this request causes (retries and a login
    // included), for the caller's tally; null: none.
    std::atomic<long>* counter = nullptr;
};

struct SessionStats {
    int logins = 0;
    int logouts = 0;
    int requests = 0;
    int retries = 0;
    int peak_in_flight = 0;
    bool basic_auth = false;
};

class BmcSession {
public:
    BmcSession(net::HttpClient& http, Endpoint endpoint, SessionOptions options = {});
    ~BmcSession();  // logs out
    BmcSession(const BmcSession&) = delete;
    BmcSession& operator=(const BmcSession&) = delete;

    // One authenticated request with retries; any HTTP status comes back as
    // a Response, except 3xx to another host (an error).
    Result<Response> request(const RequestSpec& spec, const Waiter& wait);

    // DELETE the session (if any). Later requests log in again.
    void logout();

    const Endpoint& endpoint() const { return endpoint_; }
    const SessionOptions& options() const { return options_; }
    std::string origin() const { return origin_; }
    SessionStats stats() const;
    // The current session token ("" when none), only so that output kiln
    // writes (an evidence bundle) can be checked for it. Never print it.
    std::string token_for_leak_check() const;

    // The vendor profile, once detected, adds its quirks here.
    void add_busy_message_ids(const std::vector<std::string>& ids, bool retry_conflict);

private:
    enum class Auth { Unknown, Session, Basic };

    Result<Response> exchange(const RequestSpec& spec, const std::string& token, bool use_basic, const Waiter& wait,
                              int max_attempts = 0);
    Status ensure_auth(const Waiter& wait, const std::string& stale_token, std::atomic<long>* counter);
    Status login(const Waiter& wait, std::atomic<long>* counter);
    bool is_busy(const Response& r, const RequestSpec& spec) const;
    std::chrono::milliseconds retry_delay(const Response* r, int attempt);
    std::string absolute(const std::string& uri) const;
    void acquire_slot();
    void release_slot();

    net::HttpClient& http_;
    Endpoint endpoint_;
    SessionOptions options_;
    std::string origin_;  // scheme://host:port
    std::string host_;

    mutable std::mutex auth_mu_;  // login/logout, token, auth mode
    Auth auth_ = Auth::Unknown;
    std::string token_;
    std::string session_uri_;

    std::mutex slot_mu_;
    std::condition_variable slot_cv_;
    int in_flight_ = 0;

    mutable std::mutex stats_mu_;  // stats_, rng_ and the busy quirks in options_
    SessionStats stats_;
    std::mt19937_64 rng_;
};

}  // namespace kiln::redfish
