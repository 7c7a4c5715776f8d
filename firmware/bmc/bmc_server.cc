#include "firmware/bmc/bmc_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "firmware/bmc/firmware_image.h"
#include "provisioner/net/mhd_event_loop.h"

namespace kiln::bmc {

namespace {

// Per-request scratch: the body arrives in pieces. A multipart body (the
// MultipartHttpPushUri) goes through MHD's post processor, its UpdateFile
// part straight into a spool file.
struct Upload {
    std::string body;
    bool too_large = false;
    bool multipart = false;
    std::optional<BmcResponse> refusal;  // decided on the headers: the body is discarded
    MHD_PostProcessor* pp = nullptr;
    std::optional<ImageSink> sink;
    MultipartBody parts;
    std::optional<Error> failure;  // the spool failed or the image is too large
    BmcState* state = nullptr;
};

constexpr size_t kMaxParameters = 1u << 20;

MHD_Result on_part(void* cls, MHD_ValueKind, const char* key, const char* filename, const char*, const char*,
                   const char* data, uint64_t, size_t size) {
    auto* up = static_cast<Upload*>(cls);
    if (!key) return MHD_YES;
    const std::string name = key;
    if (name == "UpdateParameters") {
        up->parts.has_parameters = true;
        if (up->parts.parameters.size() + size > kMaxParameters) {
            up->failure = make_error("bmc", "parameters_too_large", "UpdateParameters is larger than 1 MiB");
            return MHD_NO;
        }
        if (size > 0) up->parts.parameters.append(data, size);
        return MHD_YES;
    }
    if (name != "UpdateFile") return MHD_YES;  // OemParameters and the like
    if (!up->sink) {
        auto sink = ImageSink::create(up->state->spool_dir(), up->state->max_image_bytes());
        if (!sink) {
            up->failure = sink.error();
            return MHD_NO;
        }
        up->sink.emplace(std::move(*sink));
        up->parts.file_name = filename ? filename : "";
    }
    if (size == 0) return MHD_YES;
    if (auto written = up->sink->write(data, size); !written) {
        up->failure = written.error();
        return MHD_NO;
    }
    return MHD_YES;
}

bool is_multipart(const char* content_type) {
    if (!content_type) return false;
    std::string t = content_type;
    for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return t.rfind("multipart/form-data", 0) == 0;
}

constexpr size_t kMaxUpload = 1u << 20;

Result<std::string> read_pem(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("bmc", "tls_unreadable", "cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().find("-----BEGIN") == std::string::npos) {
        return make_error("bmc", "tls_unreadable", path + " is not a PEM file");
    }
    return text.str();
}

MHD_Result collect_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
    auto* headers = static_cast<HeaderMap*>(cls);
    if (key) (*headers)[key] = value ? value : "";
    return MHD_YES;
}

MHD_Result collect_query(void* cls, MHD_ValueKind, const char* key, const char* value) {
    auto* query = static_cast<std::map<std::string, std::string>*>(cls);
    if (key) (*query)[key] = value ? value : "";
    return MHD_YES;
}

MHD_Result send(MHD_Connection* connection, const BmcResponse& r) {
    MHD_Response* response =
        MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
    if (!response) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", r.content_type.c_str());
    MHD_add_response_header(response, "OData-Version", "4.0");
    MHD_add_response_header(response, "Cache-Control", "no-cache");
    for (const auto& [name, value] : r.headers) MHD_add_response_header(response, name.c_str(), value.c_str());
    MHD_Result ret = MHD_queue_response(connection, static_cast<unsigned>(r.status), response);
    MHD_destroy_response(response);
    return ret;
}

MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                      const char* upload_data, size_t* upload_data_size, void** con_cls) {
    auto* state = static_cast<BmcState*>(cls);
    if (*con_cls == nullptr) {
        auto* up = new Upload();
        up->state = state;
        *con_cls = up;
        const char* type = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Content-Type");
        if (std::string(method) == "POST" && is_multipart(type)) {
            up->multipart = true;
            HeaderMap headers;
            MHD_get_connection_values(connection, MHD_HEADER_KIND, &collect_header, &headers);
            up->refusal = state->admit_upload(method, url, headers);
            if (!up->refusal) {
                up->pp = MHD_create_post_processor(connection, 64 * 1024, &on_part, up);
                if (!up->pp) up->refusal = error_response(400, messages::malformed_json("the multipart body has no boundary"));
            }
        }
        return MHD_YES;
    }
    auto* upload = static_cast<Upload*>(*con_cls);
    if (*upload_data_size > 0) {
        if (upload->multipart) {
            // Once refused or failed, the rest is read and dropped.
            if (!upload->refusal && !upload->failure &&
                MHD_post_process(upload->pp, upload_data, *upload_data_size) != MHD_YES && !upload->failure) {
                upload->failure = make_error("bmc", "multipart_malformed", "the multipart body is malformed");
            }
        } else if (upload->body.size() + *upload_data_size > kMaxUpload) {
            upload->too_large = true;  // keep reading, answer once it is all in
        } else {
            upload->body.append(upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (upload->too_large) return send(connection, error_response(413, messages::payload_too_large()));

    BmcRequest request;
    request.method = method;
    request.path = url;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, &collect_header, &request.headers);
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &collect_query, &request.query);
    if (upload->multipart) {
        if (upload->refusal) return send(connection, *upload->refusal);
        if (upload->failure) {
            upload->sink.reset();  // removes the partial file
            const Error& e = *upload->failure;
            if (e.code == "image_too_large" || e.code == "parameters_too_large") {
                return send(connection, error_response(413, messages::payload_too_large()));
            }
            if (e.code == "multipart_malformed") return send(connection, error_response(400, messages::malformed_json(e.message)));
            return send(connection, error_response(500, messages::internal_error(e.message)));
        }
        request.multipart = std::move(upload->parts);
        if (upload->sink) {
            auto image = upload->sink->finish();
            upload->sink.reset();
            if (!image) return send(connection, error_response(500, messages::internal_error(image.error().message)));
            request.multipart->file_path = image->path;
            request.multipart->file_sha256 = image->sha256;
            request.multipart->file_size = image->size;
            request.multipart->file_head = image->head;
        }
    } else {
        request.body = std::move(upload->body);
    }
    BmcResponse response = state->handle(request);
    if (response.drop_connection) return MHD_NO;  // fault: close without an answer
    return send(connection, response);
}

void on_completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    auto* up = static_cast<Upload*>(*con_cls);
    if (up && up->pp) MHD_destroy_post_processor(up->pp);
    delete up;
    *con_cls = nullptr;
}

}  // namespace

MhdDaemon::~MhdDaemon() {
    if (d_) MHD_stop_daemon(d_);
}

MhdDaemon& MhdDaemon::operator=(MhdDaemon&& other) noexcept {
    if (this != &other) {
        if (d_) MHD_stop_daemon(d_);
        d_ = other.d_;
        other.d_ = nullptr;
    }
    return *this;
}

BmcServer::~BmcServer() {
    if (loop_ && daemon_.get()) loop_->remove(daemon_.get());
    daemon_ = MhdDaemon();
}

std::string BmcServer::url() const {
    return std::string(tls_ ? "https" : "http") + "://" + bind_ + ":" + std::to_string(port_);
}

Result<std::unique_ptr<BmcServer>> BmcServer::start(const BmcServerConfig& config, BmcState& state) {
    std::unique_ptr<BmcServer> server(new BmcServer(state));
    server->bind_ = config.bind_address;

    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(config.port);
    if (inet_pton(AF_INET, config.bind_address.c_str(), &addr.sin_addr) != 1) {
        return make_error("bmc", "listen_failed", "bind address " + config.bind_address + " is not an IPv4 address");
    }

    // AUTO picks epoll or poll: select() would cap a many-BMC process at 1024 fds.
    unsigned flags = config.loop ? net::MhdEventLoop::daemon_flags() : MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (!config.tls_cert_file.empty() || !config.tls_key_file.empty()) {
        if (config.tls_cert_file.empty() || config.tls_key_file.empty()) {
            return make_error("bmc", "tls_unreadable", "HTTPS needs both a certificate and a key");
        }
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
        d = MHD_start_daemon(flags, config.port, nullptr, nullptr, &on_request, &state, MHD_OPTION_SOCK_ADDR,
                             reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_NOTIFY_COMPLETED, &on_completed, nullptr,
                             MHD_OPTION_CONNECTION_TIMEOUT, config.connection_timeout_s, MHD_OPTION_HTTPS_MEM_CERT,
                             server->cert_pem_.c_str(), MHD_OPTION_HTTPS_MEM_KEY, server->key_pem_.c_str(),
                             MHD_OPTION_END);
    } else {
        d = MHD_start_daemon(flags, config.port, nullptr, nullptr, &on_request, &state, MHD_OPTION_SOCK_ADDR,
                             reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_NOTIFY_COMPLETED, &on_completed, nullptr,
                             MHD_OPTION_CONNECTION_TIMEOUT, config.connection_timeout_s, MHD_OPTION_END);
    }
    if (!d) {
        return make_error("bmc", "listen_failed",
                          "cannot listen on " + config.bind_address + ":" + std::to_string(config.port) +
                              (server->tls_ ? " with TLS (check the certificate and key)" : " (port in use?)"));
    }
    server->daemon_ = MhdDaemon(d);
    if (config.loop) {
        if (auto added = config.loop->add(d); !added)
            return make_error("bmc", "listen_failed", "cannot serve " + config.bind_address + ":" +
                                                          std::to_string(config.port) + ": " + added.error().message);
        server->loop_ = config.loop;
    }

    // The kernel's choice when port 0 was asked for.
    const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (!info || getsockname(info->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
        return make_error("bmc", "listen_failed", std::string("cannot read the bound port: ") + std::strerror(errno));
    }
    server->port_ = ntohs(bound.sin_port);
    return server;
}

}  // namespace kiln::bmc
