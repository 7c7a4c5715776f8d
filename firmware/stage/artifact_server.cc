#include "firmware/stage/artifact_server.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "provisioner/core/host_port.h"
#include "provisioner/core/sha256.h"
#include "provisioner/net/mhd_server.h"

namespace kiln::firmware {

namespace {

MHD_Result reply(MHD_Connection* conn, unsigned status, const char* text) {
    MHD_Response* r =
        MHD_create_response_from_buffer(std::strlen(text), const_cast<char*>(text), MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "text/plain");
    MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*, const char*,
                      size_t* upload_size, void** con_cls) {
    auto* server = static_cast<ArtifactServer*>(cls);
    if (*con_cls == nullptr) {  // first call: headers only
        *con_cls = server;
        return MHD_YES;
    }
    if (*upload_size != 0) {
        *upload_size = 0;
        return MHD_YES;
    }
    std::string m = method;
    if (m != "GET" && m != "HEAD") return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only\n");
    const ArtifactServer::Entry* e = server->find(url);
    if (!e) return reply(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    server->count_request();
    // MHD closes the fd it is given: hand it a duplicate of the verified one.
    int fd = dup(e->fd);
    if (fd < 0) return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot read artifact\n");
    MHD_Response* r = MHD_create_response_from_fd_at_offset64(e->size, fd, 0);
    if (!r) {
        close(fd);
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot read artifact\n");
    }
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

std::string random_token() {
    std::random_device rd;  // the kernel's CSPRNG on Linux
    std::string out;
    for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", rd());
    return out;
}

// The name only helps people reading BMC logs: keep it to URL-safe characters.
std::string url_safe_name(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    for (auto& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    return name;
}

}  // namespace

Result<std::unique_ptr<ArtifactServer>> ArtifactServer::start(const ArtifactServerConfig& config) {
    const auto hp = parse_host_port(config.listen);
    if (!hp)
        return make_error("firmware", "firmware.artifact_server",
                          fmt::format("artifact server listen address '{}' is not HOST:PORT", config.listen));
    std::unique_ptr<ArtifactServer> s(new ArtifactServer());
    net::MhdServerOptions o;
    o.bind_address = hp->host;
    o.port = static_cast<uint16_t>(hp->port);
    o.handler = &on_request;
    o.handler_cls = s.get();
    auto server = net::MhdServer::start(std::move(o));
    if (!server)
        return make_error("firmware", "firmware.artifact_server",
                          server.error().code == "net.bind_address"
                              ? fmt::format("artifact server listen address '{}' is not IPv4 HOST:PORT", config.listen)
                              : "artifact server: " + server.error().message);
    s->server_ = std::move(*server);
    s->port_ = s->server_->port();
    s->base_url_ = config.advertise.empty() ? fmt::format("http://{}:{}", hp->host, s->port_) : config.advertise;
    while (!s->base_url_.empty() && s->base_url_.back() == '/') s->base_url_.pop_back();
    return s;
}

ArtifactServer::~ArtifactServer() {
    server_.reset();  // no request reads a file from here on
    for (auto& [path, e] : by_path_) close(e.fd);
}

std::string ArtifactServer::served_suffix(const std::string& path, const std::string& sha256) {
    return sha256.substr(0, 16) + "/" + url_safe_name(path);
}

Result<std::string> ArtifactServer::publish(const std::string& path, const std::string& sha256, bool digest_in_path) {
    const std::string key = path + "\n" + sha256 + (digest_in_path ? "\nd" : "");
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = published_.find(key);
        if (it != published_.end()) return base_url_ + it->second;
    }
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return make_error("firmware", "firmware.artifact_io",
                          fmt::format("artifact {}: {}", path, std::strerror(errno)));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return make_error("firmware", "firmware.artifact_io", fmt::format("artifact {}: not a regular file", path));
    }
    Sha256 h;
    std::array<char, 1 << 16> buf{};
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(fd, buf.data(), buf.size(), off);
        if (n < 0) {
            if (errno == EINTR) continue;
            close(fd);
            return make_error("firmware", "firmware.artifact_io",
                              fmt::format("artifact {}: {}", path, std::strerror(errno)));
        }
        if (n == 0) break;
        h.update(std::string_view(buf.data(), static_cast<size_t>(n)));
        off += n;
    }
    std::string digest = h.hex();
    if (digest != sha256) {
        close(fd);
        return make_error(
            "firmware", "firmware.artifact_digest",
            fmt::format("artifact {}: sha256 is {}, the fleet expects {}; not served", path, digest, sha256));
    }
    std::string name = url_safe_name(path);
    std::string url_path = "/artifacts/" + random_token() + "/" + (digest_in_path ? served_suffix(path, sha256) : name);
    std::lock_guard<std::mutex> lock(mu_);
    by_path_[url_path] = Entry{fd, static_cast<uint64_t>(off), name};
    published_[key] = url_path;
    return base_url_ + url_path;
}

const ArtifactServer::Entry* ArtifactServer::find(const std::string& url_path) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_path_.find(url_path);
    return it == by_path_.end() ? nullptr : &it->second;
}

void ArtifactServer::count_request() {
    std::lock_guard<std::mutex> lock(mu_);
    ++served_;
}

uint64_t ArtifactServer::requests_served() const {
    std::lock_guard<std::mutex> lock(mu_);
    return served_;
}

}  // namespace kiln::firmware
