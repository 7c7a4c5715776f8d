// One BmcSession per BMC (URL + user) per process: every node-stage call on
// a BMC reuses it, so kiln holds one Redfish session per BMC however many
// actions run, and logs them all out when the pool goes (end of the run).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "firmware/redfish/bmc_session.h"

namespace kiln::redfish {

class SessionPool {
public:
    explicit SessionPool(net::HttpClient& http, SessionOptions options = {})
        : http_(http), options_(std::move(options)) {}
    ~SessionPool();  // logs every session out

    // The session for this endpoint, created on first use. A changed
    // password or TLS setting for the same URL + user replaces it.
    std::shared_ptr<BmcSession> acquire(const Endpoint& endpoint);
    size_t size() const;

private:
    net::HttpClient& http_;
    SessionOptions options_;
    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<BmcSession>> sessions_;
};

}  // namespace kiln::redfish
