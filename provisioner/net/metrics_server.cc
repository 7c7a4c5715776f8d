#include "provisioner/net/metrics_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include <fmt/format.h>

#include "provisioner/core/host_port.h"

namespace kiln::net {

struct MetricsServerAccess {
    static const std::function<std::string()>& render(const MetricsServer& s) { return s.render_; }
};

namespace {

MHD_Result answer(MHD_Connection* conn, unsigned status, const std::string& body, const char* type) {
    MHD_Response* r =
        MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*, const char*,
                      size_t* upload_size, void** state) {
    // The first call for a request only announces it.
    if (*state == nullptr) {
        static int marker;
        *state = &marker;
        return MHD_YES;
    }
    if (*upload_size != 0) {
        *upload_size = 0;
        return MHD_YES;
    }
    const std::string m = method;
    if (m != "GET" && m != "HEAD") return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n", "text/plain");
    if (std::strcmp(url, "/metrics") != 0) return answer(conn, MHD_HTTP_NOT_FOUND, "see /metrics\n", "text/plain");
    const auto& render = MetricsServerAccess::render(*static_cast<MetricsServer*>(cls));
    return answer(conn, MHD_HTTP_OK, render(), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                            std::function<std::string()> render) {
    const auto hp = parse_host_port(listen);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (!hp || inet_pton(AF_INET, hp->host.c_str(), &addr.sin_addr) != 1)
        return make_error("metrics", "metrics.listen",
                          fmt::format("--metrics-listen '{}': expected IPv4 HOST:PORT, as 127.0.0.1:9464", listen));
    addr.sin_port = htons(static_cast<uint16_t>(hp->port));
    std::unique_ptr<MetricsServer> s(new MetricsServer());
    s->render_ = std::move(render);
    s->daemon_ =
        MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, static_cast<uint16_t>(hp->port), nullptr,
                         nullptr, &on_request, s.get(), MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&addr),
                         MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!s->daemon_)
        return make_error("metrics", "metrics.listen",
                          fmt::format("--metrics-listen '{}': cannot listen there (address in use?)", listen));
    const MHD_DaemonInfo* info = MHD_get_daemon_info(s->daemon_, MHD_DAEMON_INFO_LISTEN_FD);
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (!info || getsockname(info->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
        return make_error("metrics", "metrics.listen", "metrics server: cannot read its bound port");
    s->port_ = ntohs(bound.sin_port);
    s->url_ = fmt::format("http://{}:{}/metrics", hp->host, s->port_);
    return s;
}

MetricsServer::~MetricsServer() {
    if (daemon_) MHD_stop_daemon(daemon_);
}

}  // namespace kiln::net
