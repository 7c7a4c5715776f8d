#include "firmware/redfish/bmc_session.h"

#include <algorithm>
#include <cctype>
#include <thread>

#include <fmt/format.h>

#include "provisioner/engine/backoff.h"
#include "provisioner/net/bmc_request_tally.h"
#include "provisioner/net/url.h"

namespace kiln::redfish {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

bool iequals(const std::string& a, const std::string& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

// Each entry's MessageId; an entry without one (some BMCs send only a
// Message) by its text, clipped, so the error still says something.
void collect_ids(const json& infos, std::vector<std::string>& out) {
    if (!infos.is_array()) return;
    for (const auto& m : infos) {
        if (!m.is_object()) continue;
        if (m.contains("MessageId") && m["MessageId"].is_string())
            out.push_back(m["MessageId"].get<std::string>());
        else if (m.contains("Message") && m["Message"].is_string() && !m["Message"].get<std::string>().empty())
            out.push_back("\"" + clip_utf8(m["Message"].get<std::string>(), 200) + "\"");
    }
}

}  // namespace

Waiter sleeping_waiter() {
    return [](milliseconds d) {
        std::this_thread::sleep_for(d);
        return true;
    };
}

std::string Response::header(const std::string& name) const {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return v;
    return "";
}

std::string Response::etag() const {
    std::string h = header("ETag");
    if (!h.empty()) return h;
    if (body.is_object() && body.contains("@odata.etag") && body["@odata.etag"].is_string())
        return body["@odata.etag"].get<std::string>();
    return "";
}

std::string Response::message_ids() const {
    std::vector<std::string> ids;
    if (body.is_object()) {
        if (body.contains("error") && body["error"].is_object()) {
            const auto& e = body["error"];
            if (e.contains("code") && e["code"].is_string()) ids.push_back(e["code"].get<std::string>());
            if (e.contains("@Message.ExtendedInfo")) collect_ids(e["@Message.ExtendedInfo"], ids);
        }
        if (body.contains("@Message.ExtendedInfo")) collect_ids(body["@Message.ExtendedInfo"], ids);
    }
    std::string out;
    for (const auto& id : ids) {
        if (out.find(id) != std::string::npos) continue;
        out += (out.empty() ? "" : ", ") + id;
    }
    return out;
}

BmcSession::BmcSession(net::HttpClient& http, Endpoint endpoint, SessionOptions options)
    : http_(http), endpoint_(std::move(endpoint)), options_(std::move(options)), rng_(std::random_device{}()) {
    auto parts = net::split_url(endpoint_.url);
    if (parts) {
        host_ = parts->host;
        bool v6 = host_.find(':') != std::string::npos;
        origin_ = fmt::format("{}://{}{}{}:{}", parts->scheme, v6 ? "[" : "", host_, v6 ? "]" : "", parts->port);
    } else {
        origin_ = endpoint_.url;  // the transport reports the malformed URL
    }
}

BmcSession::~BmcSession() {
    logout();
}

std::string BmcSession::token_for_leak_check() const {
    std::lock_guard<std::mutex> lock(auth_mu_);
    return token_;
}

SessionStats BmcSession::stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
}

void BmcSession::add_busy_message_ids(const std::vector<std::string>& ids, bool retry_conflict) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    for (const auto& id : ids)
        if (std::find(options_.busy_message_ids.begin(), options_.busy_message_ids.end(), id) ==
            options_.busy_message_ids.end())
            options_.busy_message_ids.push_back(id);
    if (retry_conflict) options_.retry_conflict = true;
}

std::string BmcSession::absolute(const std::string& uri) const {
    if (uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0) return uri;
    return net::join_url(origin_, uri);
}

void BmcSession::acquire_slot() {
    std::unique_lock<std::mutex> lock(slot_mu_);
    slot_cv_.wait(lock, [&] { return in_flight_ < std::max(1, options_.max_in_flight); });
    ++in_flight_;
    std::lock_guard<std::mutex> s(stats_mu_);
    stats_.peak_in_flight = std::max(stats_.peak_in_flight, in_flight_);
}

void BmcSession::release_slot() {
    {
        std::lock_guard<std::mutex> lock(slot_mu_);
        --in_flight_;
    }
    slot_cv_.notify_one();
}

bool BmcSession::is_busy(const Response& r, const RequestSpec& spec) const {
    std::lock_guard<std::mutex> lock(stats_mu_);  // the quirks a profile adds
    if (r.status == 503 || r.status == 429) return true;
    if ((r.status == 502 || r.status == 504 || r.status == 500) && spec.idempotent) return true;
    if (r.status == 409 && options_.retry_conflict) return true;
    if (r.status >= 400) {
        std::string ids = r.message_ids();
        for (const auto& busy : options_.busy_message_ids)
            if (!busy.empty() && ids.find(busy) != std::string::npos) return true;
    }
    return false;
}

milliseconds BmcSession::retry_delay(const Response* r, int attempt) {
    if (r) {
        std::string ra = r->header("Retry-After");
        if (!ra.empty() && std::all_of(ra.begin(), ra.end(), [](char c) { return std::isdigit(c); }) && ra.size() < 9) {
            milliseconds d(std::stoll(ra) * 1000);
            return std::min(d, options_.max_retry_after);
        }
    }
    std::lock_guard<std::mutex> lock(stats_mu_);
    return engine::backoff_delay(attempt, options_.backoff_initial, options_.backoff_max, rng_);
}

// Transport + retries, no authentication logic: the caller supplies the
// token (or Basic). 3xx to another host is refused here.
Result<Response> BmcSession::exchange(const RequestSpec& spec, const std::string& token, bool use_basic,
                                      const Waiter& wait, int max_attempts) {
    if (max_attempts <= 0) max_attempts = options_.max_attempts;
    std::string url = absolute(spec.uri);
    std::string path = spec.uri;
    if (auto parts = net::split_url(url)) {
        if (!iequals(parts->host, host_))
            return make_error("redfish", "redfish.redirect",
                              fmt::format("{} {}: link to another host ({}) refused", spec.method,
                                          net::url_for_log(url), parts->host));
        path = parts->target;
    }
    for (int attempt = 1;; ++attempt) {
        net::HttpRequest req;
        req.method = spec.method;
        req.url = url;
        req.headers = spec.headers;
        req.headers.emplace_back("Accept", "application/json");
        req.headers.emplace_back("OData-Version", "4.0");
        if (!token.empty()) req.headers.emplace_back("X-Auth-Token", token);
        if (use_basic) {
            req.basic_user = endpoint_.user;
            req.basic_password = endpoint_.password;
        }
        if (!spec.body.empty()) {
            req.body = spec.body;
            req.headers.emplace_back("Content-Type", "application/json");
        }
        req.multipart = spec.multipart;
        req.timeout = spec.timeout.count() > 0 ? spec.timeout : options_.request_timeout;
        req.connect_timeout = options_.connect_timeout;
        req.tls = endpoint_.tls;
        req.max_response = options_.max_response;

        acquire_slot();
        auto sent = http_.send(req);
        release_slot();
        {
            std::lock_guard<std::mutex> lock(stats_mu_);
            ++stats_.requests;
        }
        net::BmcRequestTally::process().request(origin_, sent ? static_cast<int>(sent->status) : 0);
        if (spec.counter) ++*spec.counter;

        const Response* busy_reply = nullptr;
        Response resp;
        if (!sent) {
            const Error& e = sent.error();
            // A request that never reached the BMC may always be resent;
            // others only when idempotent.
            bool resend = e.transient && (spec.idempotent || e.code == "http.connect");
            if (!resend || attempt >= max_attempts) return e;
        } else {
            resp.status = sent->status;
            resp.method = spec.method;
            resp.uri = path;
            resp.headers = std::move(sent->headers);
            resp.raw = std::move(sent->body);
            if (!resp.raw.empty()) {
                auto parsed = parse_json(resp.raw, spec.method + " " + path, options_.json);
                if (parsed)
                    resp.body = std::move(*parsed);
                else if (resp.ok())
                    return parsed.error();
            }
            if (resp.status >= 300 && resp.status < 400 && resp.status != 304) {
                std::string loc = resp.header("Location");
                auto target = net::split_url(absolute(loc));
                if (!target || !iequals(target->host, host_))
                    return make_error(
                        "redfish", "redfish.redirect",
                        fmt::format("{} {}: HTTP {} redirect to another host ({}) refused", spec.method, path,
                                    resp.status, target ? target->host : std::string("unparsable Location")));
                if (spec.method != "GET" || attempt >= max_attempts)
                    return make_error("redfish", "redfish.redirect",
                                      fmt::format("{} {}: HTTP {} redirect to {} not followed", spec.method, path,
                                                  resp.status, target->target));
                url = absolute(target->target);
                path = target->target;
                continue;
            }
            if (!is_busy(resp, spec) || attempt >= max_attempts) return resp;
            busy_reply = &resp;
        }
        milliseconds delay = retry_delay(busy_reply, attempt);
        {
            std::lock_guard<std::mutex> lock(stats_mu_);
            ++stats_.retries;
        }
        net::BmcRequestTally::process().retry(origin_);
        if (!wait(delay))
            return make_error("redfish", "redfish.stopped",
                              fmt::format("{} {}: stopped while waiting to retry", spec.method, path));
    }
}

Status BmcSession::login(const Waiter& wait, std::atomic<long>* counter) {
    // Unauthenticated: the service root says where sessions live.
    RequestSpec root{.method = "GET", .uri = "/redfish/v1/"};
    root.counter = counter;
    auto r = exchange(root, "", false, wait);
    if (!r) return r.error();
    std::string sessions_uri;
    if (r->status == 200 && r->body.is_object()) {
        JsonView v = r->view();
        if (auto links = v.find("Links")) {
            auto s = links->opt_link("Sessions");
            if (s) sessions_uri = *s;
        }
    }
    if (sessions_uri.empty()) {
        auth_ = Auth::Basic;
        return ok_status();
    }
    RequestSpec post{.method = "POST", .uri = sessions_uri, .idempotent = false};
    post.counter = counter;
    post.body = json{{"UserName", endpoint_.user}, {"Password", endpoint_.password}}.dump();
    auto l = exchange(post, "", false, wait);
    if (!l) return l.error();
    if (l->status == 404 || l->status == 405 || l->status == 501) {
        auth_ = Auth::Basic;  // sessions not offered after all
        return ok_status();
    }
    if (l->status == 401 || l->status == 403)
        return make_error(
            "redfish", "redfish.auth",
            fmt::format("POST {}: HTTP {}: the BMC refused user '{}'", sessions_uri, l->status, endpoint_.user));
    if (!l->ok())
        return make_error("redfish", "redfish.status",
                          fmt::format("POST {}: login failed with HTTP {}{}", sessions_uri, l->status,
                                      l->message_ids().empty() ? "" : " (" + l->message_ids() + ")"),
                          l->status >= 500);
    std::string token = l->header("X-Auth-Token");
    if (token.empty())
        return make_error("redfish", "redfish.auth",
                          fmt::format("POST {}: HTTP {} without an X-Auth-Token header", sessions_uri, l->status));
    std::string location = l->header("Location");
    if (location.empty() && l->body.is_object() && l->body.contains("@odata.id") && l->body["@odata.id"].is_string())
        location = l->body["@odata.id"].get<std::string>();
    if (auto parts = net::split_url(absolute(location)); parts && iequals(parts->host, host_))
        session_uri_ = parts->target;
    else
        session_uri_.clear();  // nothing safe to DELETE; the BMC's idle timeout ends it
    token_ = token;
    auth_ = Auth::Session;
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.logins;
    return ok_status();
}

// Logs in unless a usable token exists. `stale_token`: the token a request
// just got 401 with; when it is still ours, it is dropped and we log in
// again (another thread may already have done so).
Status BmcSession::ensure_auth(const Waiter& wait, const std::string& stale_token, std::atomic<long>* counter) {
    std::lock_guard<std::mutex> lock(auth_mu_);
    if (!stale_token.empty() && stale_token == token_) {
        token_.clear();
        session_uri_.clear();
        auth_ = Auth::Unknown;
    }
    if (auth_ == Auth::Basic || (auth_ == Auth::Session && !token_.empty())) return ok_status();
    auto s = login(wait, counter);
    if (!s) auth_ = Auth::Unknown;
    std::lock_guard<std::mutex> st(stats_mu_);
    stats_.basic_auth = auth_ == Auth::Basic;
    return s;
}

Result<Response> BmcSession::request(const RequestSpec& spec, const Waiter& wait) {
    std::string stale;
    for (int round = 0; round < 2; ++round) {
        if (auto s = ensure_auth(wait, stale, spec.counter); !s) return s.error();
        std::string token;
        bool basic = false;
        {
            std::lock_guard<std::mutex> lock(auth_mu_);
            token = token_;
            basic = auth_ == Auth::Basic;
        }
        auto r = exchange(spec, token, basic, wait);
        if (!r) return r;
        // 401: the BMC forgot our session (it restarted, or timed it out).
        // Log in again once; Basic has nothing to renew.
        if (r->status != 401 || basic || round == 1) return r;
        stale = token;
    }
    return make_error("redfish", "redfish.auth", "unreachable");
}

void BmcSession::logout() {
    std::lock_guard<std::mutex> lock(auth_mu_);
    if (auth_ == Auth::Session && !token_.empty() && !session_uri_.empty()) {
        RequestSpec del{.method = "DELETE", .uri = session_uri_};
        del.timeout = milliseconds(10000);
        // One try: a BMC that is down ends the session by its idle timeout.
        auto r = exchange(
            del, token_, false, [](milliseconds) { return false; }, 1);
        if (r) {
            std::lock_guard<std::mutex> st(stats_mu_);
            ++stats_.logouts;
        }
    }
    token_.clear();
    session_uri_.clear();
    if (auth_ == Auth::Session) auth_ = Auth::Unknown;
}

}  // namespace kiln::redfish
