#include "firmware/bmc/bmc_server.h"

#include <microhttpd.h>

#include <cctype>
#include <cstring>
#include <optional>

#include "firmware/bmc/firmware_image.h"
#include "provisioner/net/mhd_event_loop.h"
#include "provisioner/net/mhd_server.h"

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
            up->failure = make_error("bmc", "bmc.parameters_too_large", "UpdateParameters is larger than 1 MiB");
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
                up->pp = MHD_create_post_processor(connection, std::size_t{64} * 1024, &on_part, up);
                if (!up->pp)
                    up->refusal = error_response(400, messages::malformed_json("the multipart body has no boundary"));
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
                upload->failure = make_error("bmc", "bmc.multipart_malformed", "the multipart body is malformed");
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
            if (e.code == "bmc.image_too_large" || e.code == "bmc.parameters_too_large") {
                return send(connection, error_response(413, messages::payload_too_large()));
            }
            if (e.code == "bmc.multipart_malformed")
                return send(connection, error_response(400, messages::malformed_json(e.message)));
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

BmcServer::~BmcServer() {
    // Out of its loop first: then no loop thread is inside the daemon.
    if (loop_ && server_) loop_->remove(server_->daemon());
    server_.reset();
}

std::string BmcServer::url() const {
    return std::string(tls_ ? "https" : "http") + "://" + bind_ + ":" + std::to_string(port_);
}

Result<std::unique_ptr<BmcServer>> BmcServer::start(const BmcServerConfig& config, BmcState& state) {
    std::unique_ptr<BmcServer> server(new BmcServer());
    server->bind_ = config.bind_address;
    net::MhdServerOptions o;
    o.bind_address = config.bind_address;
    o.port = config.port;
    // Default (0): a thread of its own, epoll or poll (select() would cap a
    // many-BMC process at 1024 fds); with a loop, served by the loop's threads.
    o.flags = config.loop ? net::MhdEventLoop::daemon_flags() : 0;
    o.connection_timeout_s = config.connection_timeout_s;
    o.handler = &on_request;
    o.handler_cls = &state;
    o.completed = &on_completed;
    o.cert_file = config.tls_cert_file;
    o.key_file = config.tls_key_file;
    auto started = net::MhdServer::start(std::move(o));
    if (!started)
        return make_error("bmc", started.error().code == "net.tls" ? "bmc.tls_unreadable" : "bmc.listen_failed",
                          started.error().message);
    server->server_ = std::move(*started);
    server->tls_ = server->server_->tls();
    server->port_ = server->server_->port();
    if (config.loop) {
        if (auto added = config.loop->add(server->server_->daemon()); !added)
            return make_error("bmc", "bmc.listen_failed",
                              "cannot serve " + config.bind_address + ":" + std::to_string(config.port) + ": " +
                                  added.error().message);
        server->loop_ = config.loop;
    }
    return server;
}

}  // namespace kiln::bmc
