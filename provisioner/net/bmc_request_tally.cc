#include "provisioner/net/bmc_request_tally.h"

#include <fmt/format.h>

namespace kiln::net {

BmcRequestTally& BmcRequestTally::process() {
    static BmcRequestTally tally;
    return tally;
}

void BmcRequestTally::identify(const std::string& origin, const std::string& vendor) {
    std::lock_guard<std::mutex> lock(mu_);
    vendor_of_[origin] = vendor;
}

VendorRequestCounts& BmcRequestTally::counts_for(const std::string& origin) {
    auto it = vendor_of_.find(origin);
    return counts_[it == vendor_of_.end() ? std::string("unknown") : it->second];
}

void BmcRequestTally::request(const std::string& origin, int http_status) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& c = counts_for(origin);
    ++c.requests;
    if (http_status == 0)
        ++c.transport_errors;
    else if (http_status >= 500)
        ++c.server_errors;
    else if (http_status >= 400)
        ++c.client_errors;
}

void BmcRequestTally::retry(const std::string& origin) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_for(origin).retries;
}

std::map<std::string, VendorRequestCounts> BmcRequestTally::by_vendor() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
}

std::string BmcRequestTally::render() const {
    // Vendor names are kiln's own ("dell", "hpe", ... "unknown"): no label
    // escaping is needed, but a quote or backslash would still be escaped.
    auto label = [](const std::string& v) {
        std::string out;
        for (char c : v) {
            if (c == '\\' || c == '"') out += '\\';
            out += c == '\n' ? ' ' : c;
        }
        return out;
    };
    const auto counts = by_vendor();
    std::string out =
        "# HELP kiln_redfish_requests_total HTTP exchanges with BMCs (retries and logins included), by BMC vendor.\n"
        "# TYPE kiln_redfish_requests_total counter\n";
    for (const auto& [vendor, c] : counts)
        out += fmt::format("kiln_redfish_requests_total{{vendor=\"{}\"}} {}\n", label(vendor), c.requests);
    out +=
        "# HELP kiln_redfish_errors_total BMC exchanges that failed, by vendor and kind (transport: no HTTP answer; "
        "4xx, 5xx: the status class).\n"
        "# TYPE kiln_redfish_errors_total counter\n";
    for (const auto& [vendor, c] : counts) {
        out += fmt::format("kiln_redfish_errors_total{{vendor=\"{}\",kind=\"transport\"}} {}\n", label(vendor),
                           c.transport_errors);
        out +=
            fmt::format("kiln_redfish_errors_total{{vendor=\"{}\",kind=\"4xx\"}} {}\n", label(vendor), c.client_errors);
        out +=
            fmt::format("kiln_redfish_errors_total{{vendor=\"{}\",kind=\"5xx\"}} {}\n", label(vendor), c.server_errors);
    }
    out +=
        "# HELP kiln_redfish_retries_total Waits before sending to a BMC again (busy replies, 5xx, connection "
        "errors), by vendor.\n"
        "# TYPE kiln_redfish_retries_total counter\n";
    for (const auto& [vendor, c] : counts)
        out += fmt::format("kiln_redfish_retries_total{{vendor=\"{}\"}} {}\n", label(vendor), c.retries);
    return out;
}

}  // namespace kiln::net
