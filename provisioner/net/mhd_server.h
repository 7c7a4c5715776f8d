// One way to start libmicrohttpd for kiln's embedded HTTP servers: kiln-bmc,
// kiln-switch, the artifact server and the metrics endpoint. Each listens on
// an IPv4 address (port 0: the kernel picks, and the port is read back), may
// speak TLS from PEM files, and stops its daemon when it goes. Their request
// handling stays their own.
#pragma once

#include <microhttpd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "provisioner/core/result.h"

namespace kiln::net {

struct MhdServerOptions {
    std::string bind_address = "127.0.0.1";  // IPv4
    uint16_t port = 0;
    // 0: a thread of its own polling with epoll or poll (never select, which
    // stops at 1,024 descriptors). MHD_USE_TLS is added when a certificate is.
    unsigned flags = 0;
    unsigned connection_timeout_s = 60;
    MHD_AccessHandlerCallback handler = nullptr;
    void* handler_cls = nullptr;
    MHD_RequestCompletedCallback completed = nullptr;  // optional
    std::string cert_file, key_file;                   // PEM; both: HTTPS; neither: HTTP
};

class MhdServer {
public:
    // Listening when it returns. Errors (domain "net"): net.bind_address
    // (not an IPv4 address), net.tls (only one of certificate and key, or a
    // file unreadable or not PEM), net.listen (the port is taken, or TLS
    // refused the certificate or key), net.bound_port.
    static Result<std::unique_ptr<MhdServer>> start(MhdServerOptions options);
    ~MhdServer();  // stops the daemon: its threads are joined when this returns
    MhdServer(const MhdServer&) = delete;
    MhdServer& operator=(const MhdServer&) = delete;

    MHD_Daemon* daemon() const { return daemon_; }
    uint16_t port() const { return port_; }
    bool tls() const { return !cert_pem_.empty(); }

private:
    MhdServer() = default;
    std::string cert_pem_, key_pem_;  // MHD keeps pointers to these
    MHD_Daemon* daemon_ = nullptr;
    uint16_t port_ = 0;
};

}  // namespace kiln::net
