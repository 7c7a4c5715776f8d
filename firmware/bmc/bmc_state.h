// One emulated BMC: a mockup tree made live. It answers Redfish requests
// (GET, PATCH with If-Match, sessions, ComputerSystem.Reset, BIOS settings
// applied at reset) and keeps what changed in a state file, so the BMC
// survives its own restart. Transport-free: bmc_server.cc feeds it HTTP;
// tests call handle() directly. Thread-safe (one lock; BMCs are slow anyway).
//
// Authentication, as DSP0266 asks: without credentials only /redfish,
// the service root, $metadata, the OData service document and the login
// POST are served; everything else takes an X-Auth-Token from a session or
// HTTP Basic, and is refused with 401 otherwise.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "firmware/bmc/http_exchange.h"
#include "firmware/bmc/mockup_tree.h"
#include "firmware/bmc/redfish_error.h"
#include "firmware/bmc/resource_store.h"
#include "firmware/bmc/session_table.h"
#include "provisioner/core/result.h"

namespace kiln::bmc {

struct BmcConfig {
    std::string user = "admin";
    std::string password;
    std::string state_file;    // "" keeps state in memory only
    size_t session_limit = 8;  // open sessions; the next login gets 503
    // Idle timeout; unset takes SessionService.SessionTimeout, else 30 min.
    std::optional<std::chrono::seconds> session_timeout;
    SteadyClock clock;  // unset: steady_clock
    size_t max_body_bytes = 1u << 20;
};

class BmcState {
public:
    // Loads the state file over the tree when it exists. Errors: a broken
    // state file, or one written over another mockup, is refused.
    static Result<std::unique_ptr<BmcState>> open(const MockupTree& tree, BmcConfig config);

    BmcResponse handle(const BmcRequest& request);

    // For tests and logs.
    std::optional<nlohmann::json> resource(const std::string& uri);
    std::string etag(const std::string& uri);
    size_t session_count();
    const std::string& sessions_uri() const { return sessions_uri_; }

private:
    BmcState(const MockupTree& tree, BmcConfig config);

    BmcResponse dispatch(const BmcRequest& request, const std::string& uri);
    std::optional<BmcResponse> authenticate(const BmcRequest& request, const std::string& uri);
    BmcResponse get(const std::string& uri);
    BmcResponse patch(const BmcRequest& request, const std::string& uri);
    BmcResponse post(const BmcRequest& request, const std::string& uri);
    BmcResponse remove(const std::string& uri);
    BmcResponse login(const BmcRequest& request);
    BmcResponse reset_system(const BmcRequest& request, const std::string& system_uri);

    nlohmann::json session_view(const Session& s) const;
    nlohmann::json sessions_collection_view();
    std::optional<std::string> session_id_of(const std::string& uri) const;
    Result<nlohmann::json> parse_body(const BmcRequest& request, BmcResponse* refusal) const;

    // Every change goes through change() and ends in commit(): the state
    // file is written, and on failure the changes are undone.
    void change(const std::string& uri, nlohmann::json body);
    std::optional<BmcResponse> commit();

    BmcConfig config_;
    std::string mockup_;  // canonical path of the tree, recorded in the state file
    ResourceStore store_;
    SessionTable sessions_;
    std::string sessions_uri_;
    std::map<std::string, std::pair<std::string, std::string>> actions_;  // lower target -> (resource, "#X.Y")
    std::map<std::string, std::string> settings_objects_;                 // settings URI -> owner URI
    std::map<std::string, nlohmann::json> undo_;
    std::mutex mu_;
};

}  // namespace kiln::bmc
