#include "network/switch_driver.h"

#include <fmt/format.h>

namespace kiln::network {

namespace {

// Strings print bare ("lossless", not "\"lossless\""); absence prints as such.
std::string show(const nlohmann::json& v) {
    if (v.is_null()) return "(absent)";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
}

}  // namespace

std::string ConfigChange::describe() const {
    const std::string where = port.empty() ? path : port + " " + field;
    return fmt::format("{}: {} -> {}", where, show(running), show(desired));
}

Result<nlohmann::json> SwitchDriver::read_running(const std::vector<Port>& ports) {
    auto state = read_state();
    if (!state) return state.error();
    return project_running(*state, ports);
}

}  // namespace kiln::network
