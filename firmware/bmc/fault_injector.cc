#include "firmware/bmc/fault_injector.h"

namespace kiln::bmc {

nlohmann::json to_json(const FaultSettings& f) {
    return {{"latency_ms", f.latency_ms},
            {"unavailable_requests", f.unavailable_requests},
            {"retry_after_s", f.retry_after_s},
            {"drop_connections", f.drop_connections},
            {"fail_tasks", f.fail_tasks},
            {"restart_mid_update", f.restart_mid_update},
            {"purge_tasks", f.purge_tasks},
            {"session_limit", f.session_limit ? nlohmann::json(*f.session_limit) : nlohmann::json(nullptr)}};
}

Admission FaultInjector::admit() {
    std::lock_guard<std::mutex> lock(mu_);
    if (now_.drop_connections > 0) {
        --now_.drop_connections;
        return Admission::drop;
    }
    if (now_.unavailable_requests > 0) {
        --now_.unavailable_requests;
        return Admission::unavailable;
    }
    return Admission::serve;
}

unsigned FaultInjector::latency_ms() {
    std::lock_guard<std::mutex> lock(mu_);
    return now_.latency_ms;
}

unsigned FaultInjector::retry_after_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return now_.retry_after_s;
}

bool FaultInjector::take_task_failure() {
    std::lock_guard<std::mutex> lock(mu_);
    if (now_.fail_tasks == 0) return false;
    --now_.fail_tasks;
    return true;
}

bool FaultInjector::take_restart_mid_update() {
    std::lock_guard<std::mutex> lock(mu_);
    if (now_.restart_mid_update == 0) return false;
    --now_.restart_mid_update;
    return true;
}

bool FaultInjector::take_purge_task() {
    std::lock_guard<std::mutex> lock(mu_);
    if (now_.purge_tasks == 0) return false;
    --now_.purge_tasks;
    return true;
}

std::optional<size_t> FaultInjector::session_limit() {
    std::lock_guard<std::mutex> lock(mu_);
    return now_.session_limit;
}

FaultSettings FaultInjector::current() {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
}

Status FaultInjector::update(const nlohmann::json& patch) {
    if (!patch.is_object()) return make_error("bmc", "bmc.fault_field", "the faults body is not a JSON object");
    std::lock_guard<std::mutex> lock(mu_);
    FaultSettings next = now_;
    for (const auto& [key, value] : patch.items()) {
        unsigned* counter = nullptr;
        if (key == "latency_ms")
            counter = &next.latency_ms;
        else if (key == "unavailable_requests")
            counter = &next.unavailable_requests;
        else if (key == "retry_after_s")
            counter = &next.retry_after_s;
        else if (key == "drop_connections")
            counter = &next.drop_connections;
        else if (key == "fail_tasks")
            counter = &next.fail_tasks;
        else if (key == "restart_mid_update")
            counter = &next.restart_mid_update;
        else if (key == "purge_tasks")
            counter = &next.purge_tasks;
        else if (key == "session_limit") {
            if (value.is_null()) {
                next.session_limit.reset();
                continue;
            }
            if (!value.is_number_unsigned() || value.get<unsigned long long>() == 0 ||
                value.get<unsigned long long>() > 100000) {
                return make_error("bmc", "bmc.fault_field", "session_limit must be a number from 1 to 100000, or null");
            }
            next.session_limit = value.get<size_t>();
            continue;
        } else {
            return make_error("bmc", "bmc.fault_field", "unknown fault field " + key);
        }
        if (!value.is_number_unsigned() || value.get<unsigned long long>() > 3600000) {
            return make_error("bmc", "bmc.fault_field", key + " must be a non-negative integer (at most 3600000)");
        }
        *counter = value.get<unsigned>();
    }
    now_ = next;
    return ok_status();
}

void FaultInjector::clear() {
    std::lock_guard<std::mutex> lock(mu_);
    now_ = FaultSettings{};
    now_.session_limit = initial_.session_limit;
}

}  // namespace kiln::bmc
