#include "firmware/bmc/firmware_inventory.h"

#include <cctype>

#include <algorithm>

#include "firmware/bmc/bios_settings.h"
#include "firmware/bmc/mockup_tree.h"

namespace kiln::bmc {

namespace {

using nlohmann::json;

bool contains(const std::string& text, const std::string& word) {
    return lower_ascii(text).find(word) != std::string::npos;
}

std::string str(const json& body, const char* key) {
    auto it = body.find(key);
    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The RelatedItem links of a member, lower case.
// "/redfish/v1/<kind>/<id>" exactly (a SimpleStorage under a system is not the system).
bool is_member_of(const std::string& lower_link, const std::string& kind) {
    const std::string prefix = "/redfish/v1/" + kind + "/";
    if (lower_link.rfind(prefix, 0) != 0) return false;
    std::string rest = lower_link.substr(prefix.size());
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    return !rest.empty() && rest.find('/') == std::string::npos;
}

std::vector<std::string> related(const json& member) {
    std::vector<std::string> out;
    auto it = member.find("RelatedItem");
    if (it == member.end() || !it->is_array()) return out;
    for (const auto& link : *it) {
        if (link.is_object() && link.contains("@odata.id") && link["@odata.id"].is_string()) {
            out.push_back(lower_ascii(link["@odata.id"].get<std::string>()));
        }
    }
    return out;
}

std::string inventory_uri(const ResourceStore& store) {
    auto update = store.resolve("/redfish/v1/UpdateService");
    if (update) {
        const json& body = store.body(*update);
        if (auto inv = body.find("FirmwareInventory"); inv != body.end()) {
            if (auto canon = resolve_link(store, *inv)) return *canon;
        }
    }
    auto fallback = store.resolve("/redfish/v1/UpdateService/FirmwareInventory");
    return fallback ? *fallback : std::string();
}

// The first member of a collection that has `key`.
std::optional<std::string> only_member(const ResourceStore& store, const std::string& collection) {
    auto canon = store.resolve(collection);
    if (!canon) return std::nullopt;
    const json& body = store.body(*canon);
    auto members = body.find("Members");
    if (members == body.end() || !members->is_array() || members->size() != 1) return std::nullopt;
    return resolve_link(store, (*members)[0]);
}

// The ComputerSystem or Manager a member belongs to: its RelatedItem, else
// the collection's only member. A BMC fronting several systems (a blade
// enclosure) gives an unrelated member to none of them: guessing the first
// would report a version on a system that was never flashed.
std::optional<std::string> owner_of(const ResourceStore& store, const json& member, const std::string& kind) {
    for (const auto& link : related(member)) {
        if (is_member_of(link, kind)) {
            if (auto canon = store.resolve(link)) return canon;
        }
    }
    return only_member(store, "/redfish/v1/" + kind);
}

// "gpu_sxm_3" -> "gpu_sxm", "gpu3" -> "gpu": one of a numbered set of
// devices (eight GPUs) takes the image made for the set.
std::string without_index(const std::string& id) {
    size_t end = id.size();
    while (end > 0 && std::isdigit(static_cast<unsigned char>(id[end - 1]))) --end;
    if (end == id.size() || end == 0) return id;
    if (id[end - 1] == '_' || id[end - 1] == '-') --end;
    return id.substr(0, end);
}

}  // namespace

std::string component_class(const json& member) {
    for (const auto& link : related(member)) {
        if (is_member_of(link, "managers")) return "bmc";
        if (is_member_of(link, "systems")) return "bios";
    }
    const std::string id = str(member, "Id"), desc = str(member, "Description"), name = str(member, "Name");
    for (const auto& text : {id, desc}) {
        if (contains(text, "bmc") || contains(text, "ilo") || contains(text, "idrac")) return "bmc";
    }
    if (lower_ascii(desc) == "systemromactive" || contains(id, "bios") || contains(name, "bios")) return "bios";
    if (contains(name, "adapter") || contains(name, "nic") || contains(name, "network") || contains(id, "nic")) {
        return "nic";
    }
    return "";
}

std::vector<std::string> inventory_members(const ResourceStore& store) {
    std::vector<std::string> out;
    const std::string inv = inventory_uri(store);
    if (inv.empty()) return out;
    const json& body = store.body(inv);
    auto members = body.find("Members");
    if (members == body.end() || !members->is_array()) return out;
    for (const auto& link : *members) {
        if (auto canon = resolve_link(store, link)) out.push_back(*canon);
    }
    return out;
}

Result<std::vector<std::string>> update_targets(const ResourceStore& store, const std::string& component,
                                                const std::vector<std::string>& targets) {
    const std::string want = lower_ascii(component);
    const auto members = inventory_members(store);
    auto matches = [&](const std::string& member) {
        const json& body = store.body(member);
        const std::string id = lower_ascii(str(body, "Id"));
        return id == want || without_index(id) == want || lower_ascii(str(body, "Name")) == want ||
               component_class(body) == want;
    };
    std::vector<std::string> out;
    if (targets.empty()) {
        for (const auto& m : members) {
            if (matches(m)) out.push_back(m);
        }
        if (out.empty()) return make_error("bmc", "bmc.no_targets", "no FirmwareInventory member matches " + component);
        return out;
    }
    for (const auto& t : targets) {
        auto canon = store.resolve(t);
        if (!canon) return make_error("bmc", "bmc.target_unknown", "target " + t + " does not exist");
        std::string member = *canon;
        const std::string lower = lower_ascii(member);
        const bool system = is_member_of(lower, "systems"), manager = is_member_of(lower, "managers");
        if (system || manager) {
            // A system stands for its BIOS member, a manager for its BMC member.
            const std::string cls = system ? "bios" : "bmc";
            std::string found;
            for (const auto& m : members) {
                const json& body = store.body(m);
                if (component_class(body) != cls) continue;
                auto r = related(body);
                if (r.empty() || std::find(r.begin(), r.end(), lower) != r.end()) {
                    found = m;
                    break;
                }
            }
            if (found.empty())
                return make_error("bmc", "bmc.target_unknown", "target " + t + " has no " + cls + " firmware");
            member = found;
        } else if (std::find(members.begin(), members.end(), member) == members.end()) {
            return make_error("bmc", "bmc.target_unknown", "target " + t + " is not a FirmwareInventory member");
        }
        if (!matches(member)) {
            return make_error("bmc", "bmc.target_mismatch", "an image for " + component + " does not fit " + t);
        }
        if (std::find(out.begin(), out.end(), member) == out.end()) out.push_back(member);
    }
    return out;
}

VersionChange apply_version(const ResourceStore& store, const std::string& member, const std::string& version,
                            const VersionForm& form) {
    auto written = [&](const json& body, const char* key) { return form ? form(str(body, key), version) : version; };
    VersionChange out;
    json body = store.body(member);
    body["Version"] = written(body, "Version");
    const std::string cls = component_class(body);
    out.bodies.emplace_back(member, body);
    if (cls == "bios") {
        if (auto system = owner_of(store, body, "systems")) {
            json s = store.body(*system);
            s["BiosVersion"] = written(s, "BiosVersion");
            out.bodies.emplace_back(*system, std::move(s));
        }
    } else if (cls == "bmc") {
        out.bmc = true;
        if (auto manager = owner_of(store, body, "managers")) {
            json m = store.body(*manager);
            m["FirmwareVersion"] = written(m, "FirmwareVersion");
            out.bodies.emplace_back(*manager, std::move(m));
        }
    }
    return out;
}

}  // namespace kiln::bmc
