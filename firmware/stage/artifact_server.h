// kiln's own artifact server: the HTTP server BMCs pull firmware images from
// (UpdateService.SimpleUpdate ImageURI). It serves only files it has
// verified against their sha256, each under a random, unguessable path
// (/artifacts/<128-bit hex>/<file name>), GET and HEAD only. The verified
// file is held open from the moment it is hashed, so a file swapped by
// rename after the check is not what gets served.
//
// Errors, domain "firmware":
//   firmware.artifact_digest   the file's sha256 differs from the fleet's
//   firmware.artifact_io       cannot open or read the file
//   firmware.artifact_server   cannot listen on the configured address
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "provisioner/core/result.h"
#include "provisioner/net/mhd_server.h"

namespace kiln::firmware {

struct ArtifactServerConfig {
    std::string listen = "127.0.0.1:0";  // IPv4 HOST:PORT; port 0 = any free port
    // The base URL BMCs reach the server at ("http://10.0.0.5:8080"); empty =
    // http://<listen host>:<bound port>.
    std::string advertise;
};

class ArtifactServer {
public:
    static Result<std::unique_ptr<ArtifactServer>> start(const ArtifactServerConfig& config);
    ~ArtifactServer();
    ArtifactServer(const ArtifactServer&) = delete;
    ArtifactServer& operator=(const ArtifactServer&) = delete;

    // Verifies `path` against `sha256` (lowercase hex) and returns the URL it
    // is served at. Publishing the same verified file again returns the same URL.
    // With `digest_in_path` the URL ends in served_suffix() (host OS images:
    // what a BMC shows as inserted then says which image it is, whichever
    // kiln run or token served it).
    Result<std::string> publish(const std::string& path, const std::string& sha256, bool digest_in_path = false);

    // "<first 16 hex digits of sha256>/<file name, URL-safe>".
    static std::string served_suffix(const std::string& path, const std::string& sha256);

    std::string base_url() const { return base_url_; }
    uint16_t port() const { return port_; }
    uint64_t requests_served() const;

    struct Entry {
        int fd = -1;
        uint64_t size = 0;
        std::string name;
    };
    // For the request handler.
    const Entry* find(const std::string& url_path) const;
    void count_request();

private:
    ArtifactServer() = default;

    std::unique_ptr<net::MhdServer> server_;
    std::string base_url_;
    uint16_t port_ = 0;
    mutable std::mutex mu_;
    std::map<std::string, Entry> by_path_;          // "/artifacts/<token>/<name>" -> entry
    std::map<std::string, std::string> published_;  // path + "\n" + sha256 -> url path
    uint64_t served_ = 0;
};

}  // namespace kiln::firmware
