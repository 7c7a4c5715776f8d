// The Redfish operations stages use, over a shared BmcSession: GET a
// resource (2xx or an error naming it), PATCH with If-Match (one re-read and
// retry on 412), POST an action, multipart push, DELETE. The Waiter is the
// caller's: a stage passes its context's wait_for so stops and deadlines cut
// every wait short. Cheap to create; one per node-stage call is fine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/bmc_session.h"

namespace kiln::redfish {

// "GET /redfish/v1/Systems/1: HTTP 404 (Base.1.0.ResourceMissingAtURI)",
// domain "redfish", code "redfish.status"; transient for 5xx.
Error status_error(const Response& r);

class Client {
public:
    explicit Client(std::shared_ptr<BmcSession> session, Waiter wait = sleeping_waiter());

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

    BmcSession& session() { return *session_; }
    const Waiter& waiter() const { return wait_; }
    bool wait(std::chrono::milliseconds d) const { return wait_(d); }

private:
    std::shared_ptr<BmcSession> session_;
    Waiter wait_;
};

}  // namespace kiln::redfish
