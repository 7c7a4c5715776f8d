#include "firmware/stage/firmware_inputs.h"

namespace kiln::firmware {

namespace {

using nlohmann::json;

json opt_bool(const std::optional<bool>& b) {
    return b ? json(*b) : json(nullptr);
}

json components_json(const config::Fleet& fleet, const config::Node& node) {
    json comps = json::array();
    auto it = fleet.firmware.find(node.firmware);
    if (it == fleet.firmware.end()) return comps;
    for (const auto& c : it->second.components) {
        json comp = {{"name", c.name}, {"version", c.version}, {"sha256", c.sha256}, {"artifact", c.artifact}};
        if (!c.match.empty()) comp["match"] = c.match;
        if (!c.related_item.empty()) comp["related_item"] = c.related_item;
        comps.push_back(std::move(comp));
    }
    return comps;
}

json bios_json(const config::Fleet& fleet, const config::Node& node) {
    auto it = fleet.bios.find(node.bios);
    if (it == fleet.bios.end()) return nullptr;
    const auto& b = it->second;
    return {{"sriov", opt_bool(b.sriov)},
            {"iommu", opt_bool(b.iommu)},
            {"acs", opt_bool(b.acs)},
            {"above_4g_decoding", opt_bool(b.above_4g_decoding)},
            {"attributes", b.extra}};
}

}  // namespace

json firmware_inputs(const config::Fleet& fleet, const config::Node& node) {
    const auto& bmc = node.bmc;
    json out = {{"bmc",
                 {{"url", bmc.url},
                  {"username", bmc.username},
                  {"password", bmc.password ? json(bmc.password->reference()) : json(nullptr)},
                  {"ca_bundle", bmc.ca_bundle},
                  {"fingerprint", bmc.fingerprint},
                  {"verify_tls", bmc.verify_tls}}},
                {"firmware", components_json(fleet, node)},
                {"bios", bios_json(fleet, node)}};
    if (auto it = fleet.firmware.find(node.firmware);
        it != fleet.firmware.end() && it->second.apply_time != "Immediate")
        out["apply_time"] = it->second.apply_time;
    if (!bmc.system.empty()) out["bmc"]["system"] = bmc.system;
    if (auto it = fleet.host_os.find(node.host_os); it != fleet.host_os.end())
        out["host_os"] = {{"name", it->second.name}, {"image", it->second.image}, {"sha256", it->second.sha256}};
    return out;
}

}  // namespace kiln::firmware
