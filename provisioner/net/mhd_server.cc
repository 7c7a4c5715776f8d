#include "provisioner/net/mhd_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kiln::net {

namespace {

Result<std::string> read_pem(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("net", "net.tls", "cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().find("-----BEGIN") == std::string::npos)
        return make_error("net", "net.tls", path + " is not a PEM file");
    return text.str();
}

}  // namespace

Result<std::unique_ptr<MhdServer>> MhdServer::start(MhdServerOptions options) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(options.port);
    if (inet_pton(AF_INET, options.bind_address.c_str(), &addr.sin_addr) != 1)
        return make_error("net", "net.bind_address",
                          fmt::format("bind address {} is not an IPv4 address", options.bind_address));
    if (options.cert_file.empty() != options.key_file.empty())
        return make_error("net", "net.tls", "HTTPS needs both a certificate and a key");
    std::unique_ptr<MhdServer> s(new MhdServer());
    if (!options.cert_file.empty()) {
        auto cert = read_pem(options.cert_file);
        if (!cert) return cert.error();
        auto key = read_pem(options.key_file);
        if (!key) return key.error();
        s->cert_pem_ = std::move(*cert);
        s->key_pem_ = std::move(*key);
    }
    const MhdServerOptions& o = options;
    unsigned flags = o.flags != 0 ? o.flags : MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (s->tls()) flags |= MHD_USE_TLS;
    // TLS options only when serving TLS: MHD refuses them otherwise.
    if (s->tls())
        s->daemon_ =
            MHD_start_daemon(flags, o.port, nullptr, nullptr, o.handler, o.handler_cls, MHD_OPTION_SOCK_ADDR,
                             reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_NOTIFY_COMPLETED, o.completed, nullptr,
                             MHD_OPTION_CONNECTION_TIMEOUT, o.connection_timeout_s, MHD_OPTION_HTTPS_MEM_CERT,
                             s->cert_pem_.c_str(), MHD_OPTION_HTTPS_MEM_KEY, s->key_pem_.c_str(), MHD_OPTION_END);
    else
        s->daemon_ = MHD_start_daemon(flags, o.port, nullptr, nullptr, o.handler, o.handler_cls, MHD_OPTION_SOCK_ADDR,
                                      reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_NOTIFY_COMPLETED, o.completed,
                                      nullptr, MHD_OPTION_CONNECTION_TIMEOUT, o.connection_timeout_s, MHD_OPTION_END);
    if (!s->daemon_)
        return make_error("net", "net.listen",
                          fmt::format("cannot listen on {}:{}{}", o.bind_address, o.port,
                                      s->tls() ? " with TLS (check the certificate and key)" : " (port in use?)"));
    // The kernel's choice when port 0 was asked for.
    const MHD_DaemonInfo* info = MHD_get_daemon_info(s->daemon_, MHD_DAEMON_INFO_LISTEN_FD);
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (!info || getsockname(info->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
        return make_error("net", "net.bound_port", std::string("cannot read the bound port: ") + std::strerror(errno));
    s->port_ = ntohs(bound.sin_port);
    return s;
}

MhdServer::~MhdServer() {
    if (daemon_) MHD_stop_daemon(daemon_);
}

}  // namespace kiln::net
