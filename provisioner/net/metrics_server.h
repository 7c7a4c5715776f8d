// A tiny HTTP server for Prometheus scrapes: GET /metrics answers whatever
// `render` returns, as the text exposition format (version 0.0.4); nothing
// else is served. libmicrohttpd, as kiln's artifact server and emulators.
//
// Errors, domain "metrics":
//   metrics.listen   the address is not IPv4 HOST:PORT, or cannot be bound
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "provisioner/core/result.h"
#include "provisioner/net/mhd_server.h"

namespace kiln::net {

class MetricsServer {
public:
    // `listen` is "HOST:PORT" (IPv4; port 0 picks a free one). `render` is
    // called on the server's thread for each scrape.
    static Result<std::unique_ptr<MetricsServer>> start(const std::string& listen, std::function<std::string()> render);
    ~MetricsServer();  // stops serving before render goes
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    uint16_t port() const { return port_; }
    const std::string& url() const { return url_; }  // http://HOST:PORT/metrics

private:
    MetricsServer() = default;
    std::function<std::string()> render_;
    std::unique_ptr<MhdServer> server_;
    uint16_t port_ = 0;
    std::string url_;
    friend struct MetricsServerAccess;
};

}  // namespace kiln::net
