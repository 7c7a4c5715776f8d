#include "network/emulator/switch_server.h"

#include <microhttpd.h>

#include <cstring>

#include "provisioner/net/mhd_server.h"

namespace kiln::network::emulator {

namespace {

struct Upload {
    std::string body;
    bool too_large = false;
};

constexpr size_t kMaxUpload = 16u << 20;  // a 2,048-port config fits well inside

MHD_Result collect_arg(void* cls, MHD_ValueKind, const char* key, const char* value) {
    auto* args = static_cast<std::map<std::string, std::string>*>(cls);
    if (key) (*args)[key] = value ? value : "";
    return MHD_YES;
}

MHD_Result send(MHD_Connection* connection, const SwitchResponse& r) {
    MHD_Response* response =
        MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
    if (!response) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", r.content_type.c_str());
    if (r.status == 401) MHD_add_response_header(response, "WWW-Authenticate", "Basic realm=\"kiln-switch\"");
    MHD_Result ret = MHD_queue_response(connection, static_cast<unsigned>(r.status), response);
    MHD_destroy_response(response);
    return ret;
}

MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                      const char* upload_data, size_t* upload_data_size, void** con_cls) {
    auto* sw = static_cast<EmulatedSwitch*>(cls);
    if (*con_cls == nullptr) {
        *con_cls = new Upload();
        return MHD_YES;
    }
    auto* upload = static_cast<Upload*>(*con_cls);
    if (*upload_data_size > 0) {
        if (upload->body.size() + *upload_data_size > kMaxUpload)
            upload->too_large = true;
        else
            upload->body.append(upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (upload->too_large) return send(connection, {413, R"({"error":"body too large"})", "application/json"});
    SwitchRequest request;
    request.method = method;
    request.path = url;
    request.body = std::move(upload->body);
    const char* auth = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Authorization");
    request.authorization = auth ? auth : "";
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &collect_arg, &request.query);
    return send(connection, sw->handle(request));
}

void on_completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    delete static_cast<Upload*>(*con_cls);
    *con_cls = nullptr;
}

}  // namespace

SwitchServer::~SwitchServer() = default;

std::string SwitchServer::url() const {
    return std::string(tls_ ? "https" : "http") + "://" + bind_ + ":" + std::to_string(port_);
}

Result<std::unique_ptr<SwitchServer>> SwitchServer::start(const SwitchServerConfig& config, EmulatedSwitch& sw) {
    std::unique_ptr<SwitchServer> server(new SwitchServer());
    server->bind_ = config.bind_address;
    net::MhdServerOptions o;
    o.bind_address = config.bind_address;
    o.port = config.port;
    // A thread per connection (a delayed answer holds only its client), and
    // poll(), not select(): select() cannot watch a descriptor past
    // FD_SETSIZE (1,024), and each switch holds two (its socket and a
    // wake-up pipe), so select() stopped kiln-switch at ~509 switches.
    o.flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    o.handler = &on_request;
    o.handler_cls = &sw;
    o.completed = &on_completed;
    o.cert_file = config.tls_cert_file;
    o.key_file = config.tls_key_file;
    auto started = net::MhdServer::start(std::move(o));
    if (!started)
        return make_error("emulator",
                          started.error().code == "net.tls" ? "emulator.tls_unreadable" : "emulator.listen_failed",
                          started.error().message);
    server->server_ = std::move(*started);
    server->tls_ = server->server_->tls();
    server->port_ = server->server_->port();
    return server;
}

}  // namespace kiln::network::emulator
