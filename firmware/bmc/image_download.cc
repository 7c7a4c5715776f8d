#include "firmware/bmc/image_download.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

namespace kiln::bmc {

namespace {

struct CurlDeleter {
    void operator()(CURL* c) const { curl_easy_cleanup(c); }
};

struct Transfer {
    ImageSink* sink;
    Status status;
    const std::atomic<bool>* cancelled;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    auto written = t->sink->write(data, size * count);
    if (!written) {
        t->status = written;
        return 0;  // libcurl aborts with CURLE_WRITE_ERROR
    }
    return size * count;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    return t->cancelled->load() ? 1 : 0;
}

}  // namespace

std::string redact_uri(const std::string& uri) {
    std::string out = uri.substr(0, uri.find_first_of("?#"));
    const auto scheme = out.find("://");
    if (scheme == std::string::npos) return out;
    const auto host_start = scheme + 3;
    const auto path = out.find('/', host_start);
    const auto at = out.find('@', host_start);
    if (at != std::string::npos && (path == std::string::npos || at < path)) out.erase(host_start, at + 1 - host_start);
    return out;
}

Result<ReceivedImage> download_image(const std::string& uri, const DownloadOptions& options,
                                     const std::atomic<bool>& cancelled) {
    static std::once_flag init;
    std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    const std::string shown = redact_uri(uri);
    if (uri.rfind("http://", 0) != 0 && uri.rfind("https://", 0) != 0) {
        return make_error("bmc", "bmc.image_uri_unsupported", shown + ": only http and https image URIs are supported");
    }
    auto sink = ImageSink::create(options.spool_dir, options.max_bytes);
    if (!sink) return sink.error();

    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    if (!curl) return make_error("bmc", "bmc.download_failed", shown + ": cannot create a libcurl handle");
    Transfer t{&*sink, ok_status(), &cancelled};
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, uri.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min<long>(10000, static_cast<long>(options.timeout.count())));
    curl_easy_setopt(c, CURLOPT_PROXY, "");  // never an environment proxy
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
    if (!options.ca_bundle.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_bundle.c_str());
    if (!options.user.empty()) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, options.user.c_str());
        curl_easy_setopt(c, CURLOPT_PASSWORD, options.password.c_str());
    }
    const CURLcode rc = curl_easy_perform(c);
    if (!t.status) return t.status.error();
    if (rc == CURLE_FILESIZE_EXCEEDED) {
        return make_error("bmc", "bmc.image_too_large",
                          shown + " is larger than " + std::to_string(options.max_bytes) + " bytes");
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK) return make_error("bmc", "bmc.cancelled", shown + ": download cancelled");
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        return make_error("bmc", "bmc.download_failed",
                          shown + ": timed out after " + std::to_string(options.timeout.count()) + " ms");
    }
    if (rc != CURLE_OK) return make_error("bmc", "bmc.download_failed", shown + ": " + curl_easy_strerror(rc));
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        return make_error("bmc", "bmc.download_failed", shown + ": HTTP status " + std::to_string(status));
    }
    return sink->finish();
}

}  // namespace kiln::bmc
