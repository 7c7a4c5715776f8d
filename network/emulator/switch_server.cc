#include "network/emulator/switch_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln::network::emulator {

namespace {

struct Upload {
    std::string body;
    bool too_large = false;
};

constexpr size_t kMaxUpload = 16u << 20;  // a 2,048-port config fits well inside

Result<std::string> read_pem(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("emulator", "tls_unreadable", "cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().find("-----BEGIN") == std::string::npos)
        return make_error("emulator", "tls_unreadable", path + " is not a PEM file");
    return text.str();
}

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

SwitchServer::~SwitchServer() {
    if (daemon_) MHD_stop_daemon(daemon_);
}

std::string SwitchServer::url() const {
    return std::string(tls_ ? "https" : "http") + "://" + bind_ + ":" + std::to_string(port_);
}

Result<std::unique_ptr<SwitchServer>> SwitchServer::start(const SwitchServerConfig& config, EmulatedSwitch& sw) {
    std::unique_ptr<SwitchServer> server(new SwitchServer(sw));
    server->bind_ = config.bind_address;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(config.port);
    if (inet_pton(AF_INET, config.bind_address.c_str(), &addr.sin_addr) != 1)
        return make_error("emulator", "listen_failed", "bind address " + config.bind_address + " is not IPv4");
    // poll(), not select(): select() cannot watch a descriptor past FD_SETSIZE
    // (1,024), and each switch holds two (its socket and a wake-up pipe), so
    // select() stopped kiln-switch at ~509 switches.
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (!config.tls_cert_file.empty() || !config.tls_key_file.empty()) {
        if (config.tls_cert_file.empty() || config.tls_key_file.empty())
            return make_error("emulator", "tls_unreadable", "HTTPS needs both a certificate and a key");
        auto cert = read_pem(config.tls_cert_file);
        if (!cert) return cert.error();
        auto key = read_pem(config.tls_key_file);
        if (!key) return key.error();
        server->cert_pem_ = std::move(*cert);
        server->key_pem_ = std::move(*key);
        server->tls_ = true;
        flags |= MHD_USE_TLS;
    }
    MHD_Daemon* d = nullptr;
    if (server->tls_) {
        d = MHD_start_daemon(flags, config.port, nullptr, nullptr, &on_request, &sw, MHD_OPTION_SOCK_ADDR,
                             reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_NOTIFY_COMPLETED, &on_completed, nullptr,
                             MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_HTTPS_MEM_CERT, server->cert_pem_.c_str(),
                             MHD_OPTION_HTTPS_MEM_KEY, server->key_pem_.c_str(), MHD_OPTION_END);
    } else {
        d = MHD_start_daemon(flags, config.port, nullptr, nullptr, &on_request, &sw, MHD_OPTION_SOCK_ADDR,
                             reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_NOTIFY_COMPLETED, &on_completed, nullptr,
                             MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    }
    if (!d)
        return make_error("emulator", "listen_failed",
                          "cannot listen on " + config.bind_address + ":" + std::to_string(config.port) +
                              (server->tls_ ? " with TLS (check the certificate and key)" : " (port in use?)"));
    server->daemon_ = d;
    const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (!info || getsockname(info->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
        return make_error("emulator", "listen_failed",
                          std::string("cannot read the bound port: ") + std::strerror(errno));
    server->port_ = ntohs(bound.sin_port);
    return server;
}

}  // namespace kiln::network::emulator
