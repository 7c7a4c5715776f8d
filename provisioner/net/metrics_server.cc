#include "provisioner/net/metrics_server.h"

#include <microhttpd.h>

#include <cstring>

#include <fmt/format.h>

#include "provisioner/core/host_port.h"
#include "provisioner/net/mhd_server.h"

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
    auto refused = [&](const std::string& why) {
        return make_error("metrics", "metrics.listen", fmt::format("--metrics-listen '{}': {}", listen, why));
    };
    if (!hp) return refused("expected IPv4 HOST:PORT, as 127.0.0.1:9464");
    std::unique_ptr<MetricsServer> s(new MetricsServer());
    s->render_ = std::move(render);
    MhdServerOptions o;
    o.bind_address = hp->host;
    o.port = static_cast<uint16_t>(hp->port);
    o.connection_timeout_s = 30;
    o.handler = &on_request;
    o.handler_cls = s.get();
    auto server = MhdServer::start(std::move(o));
    if (!server)
        return refused(server.error().code == "net.bind_address" ? "expected IPv4 HOST:PORT, as 127.0.0.1:9464"
                                                                 : server.error().message);
    s->server_ = std::move(*server);
    s->port_ = s->server_->port();
    s->url_ = fmt::format("http://{}:{}/metrics", hp->host, s->port_);
    return s;
}

MetricsServer::~MetricsServer() = default;

}  // namespace kiln::net
