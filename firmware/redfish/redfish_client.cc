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

std::string expand_query_for(const json& root) {
    if (!root.is_object() || !root.contains("ProtocolFeaturesSupported")) return "";
    const json& pf = root["ProtocolFeaturesSupported"];
    if (!pf.is_object() || !pf.contains("ExpandQuery") || !pf["ExpandQuery"].is_object()) return "";
    const json& eq = pf["ExpandQuery"];
    auto offered = [&](const char* k) { return eq.contains(k) && eq[k].is_boolean() && eq[k].get<bool>(); };
    // "." (subordinate resources, not Links) is all a collection needs;
    // "*" also expands Links, which a collection's members are not under.
    std::string kind = offered("NoLinks") ? "." : offered("ExpandAll") ? "*" : "";
    if (kind.empty()) return "";
    return offered("Levels") ? kind + "($levels=1)" : kind;
}

Client::Client(std::shared_ptr<BmcSession> session, Waiter wait, RequestCounter counter)
    : session_(std::move(session)),
      wait_(std::move(wait)),
      counter_(counter ? std::move(counter) : std::make_shared<std::atomic<long>>(0)) {}

Result<Response> Client::send(RequestSpec spec) {
    spec.counter = counter_.get();
    return session_->request(spec, wait_);
}

Result<Response> Client::get_any(const std::string& uri) {
    return send(RequestSpec{.method = "GET", .uri = uri});
}

Result<std::vector<Client::Member>> Client::members(const std::string& collection_uri) {
    Result<Response> coll = make_error("redfish", "redfish.status", "unread");
    if (!expand_.empty()) {
        const char sep = collection_uri.find('?') == std::string::npos ? '?' : '&';
        coll = get_any(collection_uri + sep + "$expand=" + expand_);
        // Advertised but refused (400/501): read it the plain way, and stop asking.
        if (coll && (coll->status == 400 || coll->status == 501)) {
            expand_.clear();
            expand_refused_ = true;
        }
    }
    if (expand_.empty()) coll = get_any(collection_uri);
    if (!coll) return coll.error();
    coll->uri = collection_uri;  // errors name the resource, not the query
    if (!coll->ok()) return status_error(*coll);
    if (!coll->body.is_object())
        return make_error("redfish", "redfish.type",
                          fmt::format("GET {}: expected a JSON object, got {}", coll->uri,
                                      coll->raw.empty() ? "an empty body" : json_type_name(coll->body)));
    auto uris = coll->view().members();
    if (!uris) return uris.error();
    const json& listed = coll->body["Members"];
    std::vector<Member> out;
    for (size_t i = 0; i < uris->size(); ++i) {
        Member m{(*uris)[i], std::nullopt};
        // Expanded: the member's own properties are there, not just its link.
        if (listed[i].is_object() && listed[i].size() > 1) {
            Response r;
            r.status = 200;
            r.method = "GET";
            r.uri = m.uri;
            r.body = listed[i];
            m.inline_reply = std::move(r);
        }
        out.push_back(std::move(m));
    }
    return out;
}

Result<Response> Client::read(const Member& member) {
    if (member.inline_reply) return *member.inline_reply;
    return get(member.uri);
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
        if (!etag.empty())
            spec.headers.emplace_back("If-Match", etag);
        else
            spec.idempotent = false;
        auto r = send(spec);
        if (!r) return r;
        if ((r->status != 412 && r->status != 428) || round == 1) return r;
    }
    return make_error("redfish", "redfish.status", "unreachable");
}

Result<Response> Client::post(const std::string& uri, const json& body) {
    RequestSpec spec{.method = "POST", .uri = uri, .idempotent = false};
    spec.body = body.dump();
    return send(std::move(spec));
}

Result<Response> Client::post_multipart(const std::string& uri, std::vector<net::MultipartPart> parts,
                                        std::chrono::milliseconds timeout) {
    RequestSpec spec{.method = "POST", .uri = uri, .idempotent = false};
    spec.multipart = std::move(parts);
    spec.timeout = timeout;
    return send(std::move(spec));
}

Result<Response> Client::remove(const std::string& uri) {
    return send(RequestSpec{.method = "DELETE", .uri = uri});
}

}  // namespace kiln::redfish
