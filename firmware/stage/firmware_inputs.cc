#include "firmware/stage/firmware_inputs.h"

#include "firmware/stage/firmware_config.h"

namespace kiln::firmware {

namespace {

using nlohmann::json;

json opt_bool(const std::optional<bool>& b) {
    return b ? json(*b) : json(nullptr);
}

json components_json(const config::Fleet& fleet, const config::Node& node) {
    json comps = json::array();
    const FirmwareProfile* fw = firmware_profile(fleet, node);
    if (!fw) return comps;
    for (const auto& c : fw->components) {
        json comp = {{"name", c.name}, {"version", c.version}, {"sha256", c.sha256}, {"artifact", c.artifact}};
        if (!c.match.empty()) comp["match"] = c.match;
        if (!c.related_item.empty()) comp["related_item"] = c.related_item;
        comps.push_back(std::move(comp));
    }
    return comps;
}

json bios_json(const config::Fleet& fleet, const config::Node& node) {
    const BiosProfile* bp = bios_profile(fleet, node);
    if (!bp) return nullptr;
    const auto& b = *bp;
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
    if (const FirmwareProfile* fw = firmware_profile(fleet, node); fw && fw->apply_time != "Immediate")
        out["apply_time"] = fw->apply_time;
    if (!bmc.system.empty()) out["bmc"]["system"] = bmc.system;
    if (const HostOsImage* os = host_os_image(fleet, node))
        out["host_os"] = {{"name", os->name}, {"image", os->image}, {"sha256", os->sha256}};
    return out;
}

}  // namespace kiln::firmware
