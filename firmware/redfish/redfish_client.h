// The Redfish operations stages use, over a shared BmcSession: GET a
// resource (2xx or an error naming it), PATCH with If-Match (one re-read and
// retry on 412), POST an action, multipart push, DELETE. The Waiter is the
// caller's: a stage passes its context's wait_for so stops and deadlines cut
// every wait short. Cheap to create; one per node-stage call is fine.
// Request economy: a Client counts every HTTP exchange it causes (copies
// share the count, and a stage may hand in one counter for a node's whole
// flow), and reads collections with their members inline ($expand) where
// the service root offers it (expand_query_for).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/bmc_session.h"

namespace kiln::redfish {

// "GET /redfish/v1/Systems/1: HTTP 404 (Base.1.0.ResourceMissingAtURI)",
// domain "redfish", code "redfish.status"; transient for 5xx.
Error status_error(const Response& r);

// The $expand value that reads a collection with its members inline, as
// the service root's ProtocolFeaturesSupported.ExpandQuery offers it:
// ".($levels=1)" (NoLinks and Levels), "." , "*($levels=1)" or "*"
// (ExpandAll); "" when the service offers no usable form.
std::string expand_query_for(const nlohmann::json& service_root);

using RequestCounter = std::shared_ptr<std::atomic<long>>;

class Client {
public:
    explicit Client(std::shared_ptr<BmcSession> session, Waiter wait = sleeping_waiter(),
                    RequestCounter counter = nullptr);

    // 2xx with a JSON object body, or an error.
    Result<Response> get(const std::string& uri);
    // Any status (404 is an answer, not an error).
    Result<Response> get_any(const std::string& uri);
    Result<Response> service_root() { return get("/redfish/v1/"); }

    // PATCH `body` with If-Match: `etag`, or the resource's current ETag when
    // empty. On 412 (or 428) the resource is read again and the PATCH sent
    // once more with the fresh ETag. Returns the final reply, 2xx or not.
    Result<Response> patch(const std::string& uri, const nlohmann::json& body, std::string etag = "");
    // An action or create: not resent after it may have reached the BMC.
    Result<Response> post(const std::string& uri, const nlohmann::json& body);
    Result<Response> post_multipart(const std::string& uri, std::vector<net::MultipartPart> parts,
                                    std::chrono::milliseconds timeout);
    Result<Response> remove(const std::string& uri);

    // A collection's members, with their bodies when the collection came
    // back expanded. With set_expand, the collection is read with
    // "?$expand=<value>"; a service that refuses it after all (400, 501) is
    // read the plain way, and not asked again by this client.
    struct Member {
        std::string uri;
        std::optional<Response> inline_reply;  // the expanded body, as a GET would return it
    };
    Result<std::vector<Member>> members(const std::string& collection_uri);
    // A member's reply: its inline body, else a GET (2xx object or an error).
    Result<Response> read(const Member& member);
    void set_expand(std::string value) {
        if (!expand_refused_) expand_ = std::move(value);
    }
    const std::string& expand() const { return expand_; }

    // HTTP exchanges so far through this client and its copies (retries and
    // logins included).
    long requests() const { return counter_->load(); }
    const RequestCounter& counter() const { return counter_; }

    BmcSession& session() { return *session_; }
    const Waiter& waiter() const { return wait_; }
    bool wait(std::chrono::milliseconds d) const { return wait_(d); }

private:
    Result<Response> send(RequestSpec spec);

    std::shared_ptr<BmcSession> session_;
    Waiter wait_;
    RequestCounter counter_;
    std::string expand_;
    bool expand_refused_ = false;
};

}  // namespace kiln::redfish
