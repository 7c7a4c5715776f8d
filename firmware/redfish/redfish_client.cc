#include "firmware/redfish/redfish_client.h"

#include <fmt/format.h>

namespace kiln::redfish {

using nlohmann::json;

Error status_error(const Response& r) {
    std::string ids = r.message_ids();
    return make_error("redfish", "redfish.status",
                      fmt::format("{} {}: HTTP {}{}", r.method, r.uri, r.status, ids.empty() ? "" : " (" + ids + ")"),
                      r.status >= 500 || r.status == 429);
}

Client::Client(std::shared_ptr<BmcSession> session, Waiter wait) : session_(std::move(session)), wait_(std::move(wait)) {}

Result<Response> Client::get_any(const std::string& uri) {
    return session_->request(RequestSpec{.method = "GET", .uri = uri}, wait_);
}

Result<Response> Client::get(const std::string& uri) {
    auto r = get_any(uri);
    if (!r) return r;
    if (!r->ok()) return status_error(*r);
    if (!r->body.is_object())
        return make_error("redfish", "redfish.type",
                          fmt::format("GET {}: expected a JSON object, got {}", r->uri,
                                      r->raw.empty() ? "an empty body" : json_type_name(r->body)));
    return r;
}

Result<Response> Client::patch(const std::string& uri, const json& body, std::string etag) {
    for (int round = 0; round < 2; ++round) {
        if (etag.empty() || round == 1) {
            auto current = get(uri);
            if (!current) return current.error();
            etag = current->etag();
        }
        RequestSpec spec{.method = "PATCH", .uri = uri};
        spec.body = body.dump();
        // If-Match makes a PATCH safe to resend: a second copy finds the ETag
        // changed. Without one, do not resend after it may have landed.
        if (!etag.empty()) spec.headers.emplace_back("If-Match", etag);
        else spec.idempotent = false;
        auto r = session_->request(spec, wait_);
        if (!r) return r;
        if ((r->status != 412 && r->status != 428) || round == 1) return r;
    }
    return make_error("redfish", "redfish.status", "unreachable");
}

Result<Response> Client::post(const std::string& uri, const json& body) {
    RequestSpec spec{.method = "POST", .uri = uri, .idempotent = false};
    spec.body = body.dump();
    return session_->request(spec, wait_);
}

Result<Response> Client::post_multipart(const std::string& uri, std::vector<net::MultipartPart> parts,
                                        std::chrono::milliseconds timeout) {
    RequestSpec spec{.method = "POST", .uri = uri, .idempotent = false};
    spec.multipart = std::move(parts);
    spec.timeout = timeout;
    return session_->request(spec, wait_);
}

Result<Response> Client::remove(const std::string& uri) {
    return session_->request(RequestSpec{.method = "DELETE", .uri = uri}, wait_);
}

}  // namespace kiln::redfish
