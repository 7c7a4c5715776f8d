// Requests to BMCs and how they failed, by BMC vendor, for a worker's
// metrics (kiln_redfish_requests_total and friends, docs/store.md). One
// tally per process: every BMC session adds to it, the metrics endpoint
// reads it. A BMC counts as "unknown" until the inventory read has named
// its vendor (identify); after that every session to it counts there.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::net {

struct VendorRequestCounts {
    int64_t requests = 0;          // HTTP exchanges sent, retries and logins included
    int64_t transport_errors = 0;  // no HTTP answer: connect, TLS, timeout
    int64_t client_errors = 0;     // answered 4xx
    int64_t server_errors = 0;     // answered 5xx
    int64_t retries = 0;           // waits before sending again (busy, 5xx, connection errors)
};

class BmcRequestTally {
public:
    static BmcRequestTally& process();

    // `origin`: scheme://host:port, as BmcSession::origin() gives it.
    void identify(const std::string& origin, const std::string& vendor);
    // One exchange: its HTTP status, or 0 when none came back.
    void request(const std::string& origin, int http_status);
    void retry(const std::string& origin);

    std::map<std::string, VendorRequestCounts> by_vendor() const;
    // The counts in the Prometheus text exposition format.
    std::string render() const;

private:
    VendorRequestCounts& counts_for(const std::string& origin);  // under mu_

    mutable std::mutex mu_;
    std::unordered_map<std::string, std::string> vendor_of_;  // origin -> vendor
    std::map<std::string, VendorRequestCounts> counts_;       // vendor -> counts
};

}  // namespace kiln::net
