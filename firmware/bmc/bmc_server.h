// kiln-bmc's HTTP(S) front: libmicrohttpd serving one BmcState per port.
//
// Why one port per BMC (and not one port with a path prefix per BMC, as
// sushy-tools does for its many systems): each real BMC is its own Redfish
// service with its own /redfish/v1 root, session table, certificate and
// failure domain. Clients (kiln, sushy, redfishtool) address a BMC as
// host:port and navigate from the fixed root; vendor trees link with
// absolute "/redfish/v1/..." URIs that a prefix would break. So BMC i of a
// run listens on port N+i, and killing one BMC's daemon leaves the others.
//
// Binds 127.0.0.1 unless told otherwise: an emulator with a test password
// does not belong on a shared network by accident. Port 0 asks the kernel
// for a free port (port() tells which), which is what the tests use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "firmware/bmc/bmc_state.h"
#include "provisioner/core/result.h"
#include "provisioner/net/mhd_server.h"

namespace kiln::net {
class MhdEventLoop;
}

namespace kiln::bmc {

struct BmcServerConfig {
    std::string bind_address = "127.0.0.1";  // IPv4
    uint16_t port = 0;                       // 0: any free port
    std::string tls_cert_file;               // PEM; both set: HTTPS
    std::string tls_key_file;                // PEM
    unsigned connection_timeout_s = 60;
    // Null: the daemon has a thread of its own. Else one of this loop's
    // threads serves it, with other daemons (many BMCs in one process);
    // the loop must outlive the server.
    net::MhdEventLoop* loop = nullptr;
};

class BmcServer {
public:
    // Listening when it returns. Errors: "bmc.tls_unreadable", "bmc.listen_failed".
    // `state` must outlive the server.
    static Result<std::unique_ptr<BmcServer>> start(const BmcServerConfig& config, BmcState& state);
    ~BmcServer();  // stops the daemon before anything it uses goes away

    uint16_t port() const { return port_; }
    std::string url() const;  // "https://127.0.0.1:8443"

private:
    BmcServer() = default;  // start() makes one; the server's handler reads the state

    bool tls_ = false;
    std::string bind_;
    uint16_t port_ = 0;
    net::MhdEventLoop* loop_ = nullptr;
    std::unique_ptr<net::MhdServer> server_;
};

}  // namespace kiln::bmc
