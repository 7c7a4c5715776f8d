#include "firmware/bmc/computer_system_reset.h"

namespace kiln::bmc {

Result<ResetOutcome> plan_reset(const std::string& power_state, const std::string& reset_type) {
    const bool on = power_state != "Off";
    if (reset_type == "On" || reset_type == "ForceOn") return ResetOutcome{"On", !on};
    if (reset_type == "ForceOff" || reset_type == "GracefulShutdown" || reset_type == "Suspend") {
        return ResetOutcome{"Off", false};
    }
    // A restart of a host that is off still brings it up through POST.
    if (reset_type == "GracefulRestart" || reset_type == "ForceRestart" || reset_type == "PowerCycle" ||
        reset_type == "FullPowerCycle") {
        return ResetOutcome{"On", true};
    }
    if (reset_type == "PushPowerButton") return on ? ResetOutcome{"Off", false} : ResetOutcome{"On", true};
    if (reset_type == "Nmi") return ResetOutcome{power_state, false};
    if (reset_type == "Pause") return ResetOutcome{"Paused", false};
    if (reset_type == "Resume") return ResetOutcome{"On", false};
    return make_error("bmc", "bmc.reset_type_unknown", "ResetType " + reset_type + " is not a Redfish ResetType");
}

std::vector<std::string> allowed_reset_types(const nlohmann::json& system, const nlohmann::json& action_info) {
    std::vector<std::string> out;
    auto take = [&](const nlohmann::json& list) {
        if (!list.is_array()) return;
        for (const auto& v : list) {
            if (v.is_string()) out.push_back(v.get<std::string>());
        }
    };
    const auto actions = system.find("Actions");
    if (actions != system.end() && actions->is_object()) {
        const auto reset = actions->find("#ComputerSystem.Reset");
        if (reset != actions->end() && reset->is_object()) {
            const auto inline_list = reset->find("ResetType@Redfish.AllowableValues");
            if (inline_list != reset->end()) take(*inline_list);
        }
    }
    if (!out.empty() || !action_info.is_object()) return out;
    const auto params = action_info.find("Parameters");
    if (params == action_info.end() || !params->is_array()) return out;
    for (const auto& p : *params) {
        if (p.is_object() && p.value("Name", "") == "ResetType" && p.contains("AllowableValues")) {
            take(p["AllowableValues"]);
        }
    }
    return out;
}

}  // namespace kiln::bmc
