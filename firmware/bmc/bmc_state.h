// One emulated BMC: a mockup tree made live. It answers Redfish requests
// (GET, PATCH with If-Match, sessions, ComputerSystem.Reset, BIOS settings
// applied at reset, VirtualMedia, firmware updates as tasks) and keeps what
// changed in a state file, so the BMC survives its own restart. It also
// serves its control endpoint /kiln-bmc/ (faults, what was flashed).
// Transport-free: bmc_server.cc feeds it HTTP; tests call handle() directly.
// Thread-safe (one lock; BMCs are slow anyway). SimpleUpdate downloads run
// on worker threads that the destructor cancels and joins.
//
// Authentication, as DSP0266 asks: without credentials only /redfish,
// the service root, $metadata, the OData service document and the login
// POST are served; everything else takes an X-Auth-Token from a session or
// HTTP Basic, and is refused with 401 otherwise.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/bmc/fault_injector.h"
#include "firmware/bmc/http_exchange.h"
#include "firmware/bmc/image_download.h"
#include "firmware/bmc/mockup_tree.h"
#include "firmware/bmc/power_backend.h"
#include "firmware/bmc/redfish_error.h"
#include "firmware/bmc/resource_store.h"
#include "firmware/bmc/session_table.h"
#include "firmware/bmc/update_task.h"
#include "firmware/bmc/vendor_mode.h"
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

    // Firmware updates (docs/kiln-bmc.md "Firmware updates").
    double task_seconds = 5;     // how long a task runs once its image is in
    double restart_seconds = 1;  // 503 after an emulated BMC restart
    // How long a host reset's POST takes: BIOS settings pending at the reset
    // are applied when it ends (0: at the reset itself).
    double post_seconds = 0;
    // > 0: a ComputerSystem.Reset answers 202 with a task that runs this
    // long (HPE's RMC and ODIM answer a reset with a task); 0: 204.
    double reset_task_seconds = 0;
    // > 0: VirtualMedia InsertMedia/EjectMedia and a PATCH of a VirtualMedia
    // or ComputerSystem resource answer 202 with a task that runs this long
    // (DSP0266 lets any operation answer 202); 0: 204 / 200.
    double media_task_seconds = 0;
    DownloadOptions download;             // SimpleUpdate: timeout, size cap, spool dir, TLS
    std::function<double()> wall_clock;   // seconds since the epoch; unset: the system clock
    FaultSettings faults;                 // at start
    std::shared_ptr<PowerBackend> power;  // unset: PowerState lives in the tree
    // Served as this vendor's BMC (vendor_mode.h); unset: read from the tree.
    std::optional<VendorMode> vendor;
};

// The mockup as one vendor serves it, indexed: what every BMC of a process
// starts from, built once. BMCs share its bodies until they change one
// (a process serving 5,000 BMCs held 5.5 GB when each copied the tree).
struct BmcTemplate {
    MockupTree tree;  // shaped (vendor_mode.h)
    ResourceStore store;
    VendorMode vendor = VendorMode::Generic;
};

class BmcState {
public:
    // `vendor` unset: read from the tree.
    static std::shared_ptr<const BmcTemplate> prepare(const MockupTree& captured, std::optional<VendorMode> vendor);
    // Loads the state file over the template when it exists. Errors: a
    // broken state file, or one written over another mockup, is refused.
    // config.vendor is the template's.
    static Result<std::unique_ptr<BmcState>> open(const BmcTemplate& base, BmcConfig config);
    static Result<std::unique_ptr<BmcState>> open(const MockupTree& tree, BmcConfig config);
    ~BmcState();

    // Applies the faults (latency, drop, 503) and answers. A response with
    // drop_connection set is to be answered by closing the connection.
    BmcResponse handle(const BmcRequest& request);

    // Before a multipart body is read: nullopt when `uri` is the push URI and
    // the credentials are good, so the transport may spool the file; else
    // the answer to give once the body has been discarded.
    std::optional<BmcResponse> admit_upload(const std::string& method, const std::string& uri,
                                            const HeaderMap& headers);
    const std::string& push_uri() const { return push_uri_; }
    size_t max_image_bytes() const { return config_.download.max_bytes; }
    const std::string& spool_dir() const { return config_.download.spool_dir; }

    FaultInjector& faults() { return faults_; }
    // Waits for the SimpleUpdate downloads started so far (tests).
    void wait_downloads();

    // For tests and logs.
    std::optional<nlohmann::json> resource(const std::string& uri);
    std::string etag(const std::string& uri);
    size_t session_count();
    const std::string& sessions_uri() const { return sessions_uri_; }

private:
    BmcState(const BmcTemplate& base, BmcConfig config);

    BmcResponse dispatch(const BmcRequest& request, const std::string& uri);
    std::optional<BmcResponse> authenticate(const BmcRequest& request, const std::string& uri);
    BmcResponse get(const std::string& uri);
    // A GET with ?$expand=... (expand_query.h): refused as the service root's
    // ProtocolFeaturesSupported says, else the body with references inline.
    BmcResponse get_expanded(const std::string& uri, const std::string& expand_value);
    BmcResponse patch(const BmcRequest& request, const std::string& uri);
    BmcResponse post(const BmcRequest& request, const std::string& uri);
    BmcResponse remove(const std::string& uri);
    BmcResponse login(const BmcRequest& request);
    BmcResponse reset_system(const BmcRequest& request, const std::string& system_uri);
    // With media_task_seconds: the write just changed (not yet committed) is
    // answered 202 with a task that follows it; nullopt otherwise.
    std::optional<BmcResponse> follow_write(const BmcRequest& request, const nlohmann::json& params,
                                            const std::string& kind);

    // Firmware updates (bmc_state_updates.cc).
    BmcResponse simple_update(const BmcRequest& request, const std::string& action_uri,
                              const std::string& resource_uri);
    BmcResponse push_update(const BmcRequest& request);
    BmcResponse accept_task(UpdateTask task, bool faults = true);
    void start_task(UpdateTask& task, const ReceivedImage& image, double now);
    void fail_task(UpdateTask& task, const RedfishMessage& why, double now);
    void download(const std::string& task_id, const std::string& uri, const DownloadOptions& options);
    bool advance(double now);  // true when something changed
    // The BIOS settings pending for `system_uri`, applied as POST ends.
    void apply_bios_at_post(const std::string& system_uri, const std::string& time);
    void finish_task(UpdateTask& task, double at);
    void apply_update(const UpdateTask& task, double at);
    void apply_pending_updates(double now);
    void restart_bmc(double at);
    // `polled`: a client's GET (false for the answer to the POST itself).
    std::optional<BmcResponse> task_get(const std::string& uri, double now, bool polled = true);
    // Dell: <manager>/Oem/Dell/Jobs[/JID_n] and DellJobService actions.
    std::optional<BmcResponse> dell_job_get(const std::string& uri, double now);
    std::optional<BmcResponse> dell_job_action(const BmcRequest& request, const std::string& uri);
    nlohmann::json tasks_collection_view();
    UpdateTask* find_task(const std::string& id);
    BmcResponse media_action(const BmcRequest& request, const std::string& media_uri, bool insert);
    BmcResponse control(const BmcRequest& request, const std::string& uri);
    nlohmann::json emulator_state() const;
    nlohmann::json boot_record(const nlohmann::json& system, const std::string& reset_type, const std::string& time);
    void seed_update_service();
    Status load_emulator_state(const nlohmann::json& j);
    double now() const;

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

    FaultInjector faults_;
    std::string tasks_uri_;         // the TaskService's Tasks collection
    std::string monitors_uri_;      // /redfish/v1/TaskService/TaskMonitors
    std::string push_uri_;          // MultipartHttpPushUri
    std::string power_system_uri_;  // the ComputerSystem a power backend drives
    VendorMode vendor_ = VendorMode::Generic;
    std::string dell_jobs_uri_;  // Dell: <first manager>/Oem/Dell/Jobs
    std::vector<UpdateTask> tasks_;
    unsigned long next_task_ = 1;
    std::vector<nlohmann::json> pending_updates_;  // staged OnReset: {task, component, version, sha256, targets}
    std::vector<nlohmann::json> applied_updates_;  // what was flashed, for /kiln-bmc/state
    // A Bios without a settings object (AMI) takes the PATCH on itself, and,
    // as on the real firmware, the attributes change at the next POST: Bios
    // URI -> the attributes waiting for it.
    std::map<std::string, nlohmann::json> direct_bios_pending_;
    nlohmann::json last_boot_ = nullptr;
    unsigned long resets_ = 0;      // ComputerSystem.Reset requests carried out
    double unavailable_until_ = 0;  // an emulated BMC restart answers 503 until then
    // A POST under way (post_seconds): the system it runs on and its end.
    std::string post_system_;
    double post_until_ = 0;

    std::mutex mu_;
    std::atomic<bool> stopping_{false};
    // Redfish requests received (control endpoint excluded), for
    // /kiln-bmc/state: what a client's economy is measured by.
    std::atomic<unsigned long> redfish_requests_{0};
    std::vector<std::thread> workers_;  // SimpleUpdate downloads
};

}  // namespace kiln::bmc
