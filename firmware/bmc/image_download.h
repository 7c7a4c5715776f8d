// The emulated BMC pulling a SimpleUpdate ImageURI, as a real one does:
// libcurl, http and https only, no redirects to follow, a timeout on the
// whole transfer and a cap on its size, streamed into an ImageSink. Runs on
// a worker thread; `cancelled` stops it early (the emulator shutting down).
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "firmware/bmc/firmware_image.h"
#include "provisioner/core/result.h"

namespace kiln::bmc {

struct DownloadOptions {
    std::chrono::milliseconds timeout{300000};
    size_t max_bytes = 1u << 30;
    std::string spool_dir;
    std::string ca_bundle;  // "" = system store
    bool verify_tls = true;
    std::string user;      // Basic auth to the image server when not empty
    std::string password;  // never logged
};

// Errors (domain "bmc"): "bmc.image_uri_unsupported", "bmc.download_failed" (the
// message says why: HTTP status, timeout, connection), "bmc.image_too_large",
// "bmc.spool_failed", "cancelled". Messages never hold credentials or the query.
Result<ReceivedImage> download_image(const std::string& uri, const DownloadOptions& options,
                                     const std::atomic<bool>& cancelled);

// "http://host:port/path" without userinfo or query, for messages.
std::string redact_uri(const std::string& uri);

}  // namespace kiln::bmc
