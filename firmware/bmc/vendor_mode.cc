#include "firmware/bmc/vendor_mode.h"

#include <cctype>
#include <vector>

namespace kiln::bmc {

using nlohmann::json;

namespace {

struct Named {
    VendorMode mode;
    const char* name;
    const char* root_vendor;  // what the mode writes into the service root's Vendor
};

const std::vector<Named>& modes() {
    static const std::vector<Named> all = {
        {VendorMode::Generic, "generic", ""},     {VendorMode::Dell, "dell", "Dell"},
        {VendorMode::Hpe, "hpe", "HPE"},          {VendorMode::Supermicro, "supermicro", "Supermicro"},
        {VendorMode::Lenovo, "lenovo", "Lenovo"}, {VendorMode::OpenBmc, "openbmc", "OpenBMC"},
        {VendorMode::Ami, "ami", "AMI"},
    };
    return all;
}

bool contains(const std::string& haystack, const char* needle) {
    return lower_ascii(haystack).find(needle) != std::string::npos;
}

std::optional<VendorMode> from_text(const std::string& text) {
    if (text.empty()) return std::nullopt;
    if (contains(text, "dell") || contains(text, "idrac")) return VendorMode::Dell;
    if (contains(text, "hpe") || contains(text, "ilo") || lower_ascii(text) == "hp") return VendorMode::Hpe;
    if (contains(text, "supermicro")) return VendorMode::Supermicro;
    if (contains(text, "lenovo") || contains(text, "xcc")) return VendorMode::Lenovo;
    if (contains(text, "openbmc")) return VendorMode::OpenBmc;
    if (lower_ascii(text) == "ami" || contains(text, "megarac")) return VendorMode::Ami;
    return std::nullopt;
}

std::string str(const json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

const json* resource(const MockupTree& tree, const std::string& uri) {
    auto it = tree.resources.find(normalize_uri(uri));
    return it == tree.resources.end() ? nullptr : &it->second;
}

std::string link_of(const json& body, const char* key) {
    if (!body.is_object() || !body.contains(key) || !body[key].is_object()) return "";
    return normalize_uri(str(body[key], "@odata.id"));
}

// Each Bios resource that links a settings object: (bios URI, settings URI).
std::vector<std::pair<std::string, std::string>> bios_settings(const MockupTree& tree) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [uri, body] : tree.resources) {
        if (str(body, "@odata.type").rfind("#Bios.", 0) != 0) continue;
        if (!body.contains("@Redfish.Settings") || !body["@Redfish.Settings"].is_object()) continue;
        std::string so = link_of(body["@Redfish.Settings"], "SettingsObject");
        if (!so.empty() && so != uri) out.emplace_back(uri, so);
    }
    return out;
}

}  // namespace

std::optional<VendorMode> vendor_mode_from_name(const std::string& name) {
    for (const auto& m : modes())
        if (name == m.name) return m.mode;
    return std::nullopt;
}

std::string vendor_mode_name(VendorMode mode) {
    for (const auto& m : modes())
        if (m.mode == mode) return m.name;
    return "generic";
}

VendorMode infer_vendor_mode(const MockupTree& tree) {
    const json* root = resource(tree, "/redfish/v1");
    if (!root) return VendorMode::Generic;
    if (auto v = from_text(str(*root, "Vendor"))) return *v;
    if (root->contains("Oem") && (*root)["Oem"].is_object())
        for (const auto& [key, value] : (*root)["Oem"].items())
            if (auto v = from_text(key)) return *v;
    if (const json* managers = resource(tree, link_of(*root, "Managers"))) {
        const json members = managers->value("Members", json::array());
        if (members.is_array() && !members.empty() && members[0].is_object())
            if (const json* m = resource(tree, str(members[0], "@odata.id"))) {
                if (auto v = from_text(str(*m, "Model"))) return *v;
                if (auto v = from_text(str(*m, "Manufacturer"))) return *v;
            }
    }
    return VendorMode::Generic;
}

std::string in_vendor_form(VendorMode mode, const std::string& current, const std::string& version) {
    if (mode != VendorMode::Hpe || version.empty() || !std::isdigit(static_cast<unsigned char>(version[0])))
        return version;
    for (size_t at = current.find(" v"); at != std::string::npos; at = current.find(" v", at + 1))
        if (at + 2 < current.size() && std::isdigit(static_cast<unsigned char>(current[at + 2])))
            return current.substr(0, at + 2) + version;
    return version;
}

void shape_tree(MockupTree& tree, VendorMode mode) {
    auto root = tree.resources.find("/redfish/v1");
    for (const auto& m : modes())
        if (m.mode == mode && *m.root_vendor && root != tree.resources.end()) root->second["Vendor"] = m.root_vendor;
    if (mode != VendorMode::Lenovo && mode != VendorMode::Ami) return;
    for (const auto& [bios_uri, settings_uri] : bios_settings(tree)) {
        json settings = tree.resources[settings_uri];
        tree.resources.erase(settings_uri);
        tree.resources[bios_uri].erase("@Redfish.Settings");
        if (mode == VendorMode::Lenovo) {
            // XCC: the pending set lives at <Bios>/Pending, found by name.
            const std::string pending = bios_uri + "/Pending";
            settings["@odata.id"] = pending;
            tree.resources[pending] = std::move(settings);
        }
    }
}

}  // namespace kiln::bmc
