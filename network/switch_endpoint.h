// Where and how an HTTP switch driver (NVUE, eAPI) reaches its switch: the
// base URL from the fleet's `address`, the login with the password resolved
// from its secret reference, and the request limits. The password lives
// here only; no message ever carries it.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/net/http_client.h"

namespace kiln::network {

struct SwitchEndpoint {
    std::string name;      // the fleet's switch name, for messages
    std::string base_url;  // "https://10.0.0.7:8765", no trailing '/'
    std::string username;
    std::string password;
    net::TlsOptions tls;
    std::chrono::milliseconds timeout{30000};
    std::chrono::milliseconds connect_timeout{10000};

    // A request to base_url + target with Basic auth and the limits above.
    net::HttpRequest request(const std::string& method, const std::string& target) const;
};

// `address` is "host", "host:port" (scheme `default_scheme`, port
// `default_port` when absent) or a full http(s):// URL.
// Errors (domain "network"): "network.bad_address", "credentials" (no username, or
// the password reference does not resolve).
Result<SwitchEndpoint> endpoint_for(const config::Switch& sw, const std::string& default_scheme, int default_port,
                                    std::chrono::milliseconds timeout);

// The body as JSON; a non-2xx status or a body that is not JSON is an error
// naming the switch, the method and the path ("network", "network.switch_http").
Result<nlohmann::json> json_body(const SwitchEndpoint& ep, const net::HttpRequest& request,
                                 const Result<net::HttpResponse>& response);

}  // namespace kiln::network
