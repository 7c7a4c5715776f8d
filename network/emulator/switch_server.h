// kiln-switch's HTTP(S) front: libmicrohttpd serving one EmulatedSwitch per
// port, as kiln-bmc serves one BMC per port (each switch is its own
// management endpoint and failure domain). A thread per connection, so a
// delayed answer (the timeout fault) holds up only its own client; poll(),
// not select(), so one process serves thousands of switches (two descriptors
// each; raise RLIMIT_NOFILE, as kiln-switch does).
// Listening, TLS and the bound port: net::MhdServer, as for kiln-bmc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "network/emulator/emulated_switch.h"
#include "provisioner/core/result.h"
#include "provisioner/net/mhd_server.h"

namespace kiln::network::emulator {

struct SwitchServerConfig {
    std::string bind_address = "127.0.0.1";  // IPv4
    uint16_t port = 0;                       // 0: any free port
    std::string tls_cert_file;               // PEM; both set: HTTPS
    std::string tls_key_file;
};

class SwitchServer {
public:
    // Listening when it returns. `sw` must outlive the server.
    // Errors: "emulator.tls_unreadable", "emulator.listen_failed".
    static Result<std::unique_ptr<SwitchServer>> start(const SwitchServerConfig& config, EmulatedSwitch& sw);
    ~SwitchServer();  // stops serving before anything it uses goes
    SwitchServer(const SwitchServer&) = delete;
    SwitchServer& operator=(const SwitchServer&) = delete;

    uint16_t port() const { return port_; }
    std::string url() const;  // "http://127.0.0.1:8765"

private:
    SwitchServer() = default;  // start() makes one; the server's handler reads the switch

    bool tls_ = false;
    std::string bind_;
    uint16_t port_ = 0;
    std::unique_ptr<net::MhdServer> server_;
};

}  // namespace kiln::network::emulator
