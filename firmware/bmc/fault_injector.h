// Faults one emulated BMC injects on request (docs/kiln-bmc.md, "Control
// endpoint"): latency, 503 with Retry-After, dropped connections, failed
// update tasks, a BMC restart in the middle of an update, a session limit.
// Set at start from the command line and changed at run time through
// /kiln-bmc/faults. Counters count down as the faults fire. Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::bmc {

struct FaultSettings {
    unsigned latency_ms = 0;
    unsigned unavailable_requests = 0;
    unsigned retry_after_s = 1;
    unsigned drop_connections = 0;
    unsigned fail_tasks = 0;
    unsigned restart_mid_update = 0;
    unsigned purge_tasks = 0;             // the next N update tasks vanish (404) once polled
    std::optional<size_t> session_limit;  // unset: the BMC's configured limit
};

nlohmann::json to_json(const FaultSettings& f);

// What happens to the next Redfish request.
enum class Admission { serve, unavailable, drop };

class FaultInjector {
public:
    explicit FaultInjector(FaultSettings initial = {}) : initial_(initial), now_(initial) {}

    // Takes one from the 503 or drop counters when set (drop first).
    Admission admit();
    unsigned latency_ms();
    unsigned retry_after_s();
    bool take_task_failure();
    bool take_restart_mid_update();
    bool take_purge_task();
    std::optional<size_t> session_limit();

    FaultSettings current();
    // Merges `patch` (the /kiln-bmc/faults fields). Errors "bmc.fault_field"
    // name the field that is unknown or of the wrong type; nothing changes then.
    Status update(const nlohmann::json& patch);
    void clear();  // every counter to zero, the session limit back to its start value

private:
    FaultSettings initial_;
    FaultSettings now_;
    std::mutex mu_;
};

}  // namespace kiln::bmc
