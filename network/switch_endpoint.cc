#include "network/switch_endpoint.h"

#include <fmt/format.h>

#include "provisioner/core/json_limits.h"
#include "provisioner/net/url.h"

namespace kiln::network {

net::HttpRequest SwitchEndpoint::request(const std::string& method, const std::string& target) const {
    net::HttpRequest r;
    r.method = method;
    r.url = base_url + target;
    r.timeout = timeout;
    r.connect_timeout = connect_timeout;
    r.tls = tls;
    r.basic_user = username;
    r.basic_password = password;
    r.headers.push_back({"Accept", "application/json"});
    r.max_response = 64u << 20;
    return r;
}

Result<SwitchEndpoint> endpoint_for(const config::Switch& sw, const std::string& default_scheme, int default_port,
                                    std::chrono::milliseconds timeout) {
    SwitchEndpoint ep;
    ep.name = sw.name;
    ep.timeout = timeout;
    std::string url = sw.address;
    if (url.find("://") == std::string::npos) {
        const bool has_port = url.rfind(':') != std::string::npos && url.back() != ']';
        url = default_scheme + "://" + url + (has_port ? "" : ":" + std::to_string(default_port));
    }
    auto parts = net::split_url(url);
    if (!parts || parts->host.empty())
        return make_error("network", "network.bad_address",
                          fmt::format("switch {}: address {} is not host[:port] or an http(s) URL", sw.name,
                                      net::url_for_log(sw.address)));
    const std::string host = parts->host.find(':') != std::string::npos ? "[" + parts->host + "]" : parts->host;
    ep.base_url = fmt::format("{}://{}:{}", parts->scheme, host, parts->port);
    if (sw.username.empty())
        return make_error("network", "network.credentials",
                          fmt::format("switch {}: no username in the fleet", sw.name));
    ep.username = sw.username;
    if (!sw.password)
        return make_error("network", "network.credentials",
                          fmt::format("switch {}: no password in the fleet", sw.name));
    auto pw = sw.password->resolve();
    if (!pw)
        return make_error(
            "network", "network.credentials",
            fmt::format("switch {}: password {}: {}", sw.name, sw.password->reference(), pw.error().message));
    ep.password = std::move(*pw);
    return ep;
}

Result<nlohmann::json> json_body(const SwitchEndpoint& ep, const net::HttpRequest& request,
                                 const Result<net::HttpResponse>& response) {
    const std::string what = fmt::format("switch {}: {} {}", ep.name, request.method, net::url_for_log(request.url));
    if (!response) {
        Error e = response.error();
        e.domain = "network";
        e.message = fmt::format("switch {}: {}", ep.name, e.message);
        return e;
    }
    if (response->status == 401 || response->status == 403)
        return make_error("network", "network.switch_auth",
                          fmt::format("{}: login refused ({})", what, response->status));
    if (response->status < 200 || response->status >= 300) {
        std::string detail = response->body.substr(0, 200);
        for (auto& c : detail)
            if (c == '\n' || c == '\r') c = ' ';
        return make_error("network", "network.switch_http",
                          fmt::format("{}: status {}: {}", what, response->status, detail), response->status >= 500);
    }
    if (response->body.empty()) return nlohmann::json::object();
    auto doc = parse_json_limited(response->body, what, {}, "network");
    if (!doc)
        return make_error("network", "network.switch_http",
                          fmt::format("the answer is not JSON: {}", doc.error().message));
    return doc;
}

}  // namespace kiln::network
