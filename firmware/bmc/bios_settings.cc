#include "firmware/bmc/bios_settings.h"

#include "firmware/bmc/json_reader.h"

namespace kiln::bmc {

std::optional<std::string> resolve_link(const ResourceStore& store, const nlohmann::json& link) {
    if (!link.is_object()) return std::nullopt;
    auto id = link.find("@odata.id");
    if (id == link.end() || !id->is_string()) return std::nullopt;
    return store.resolve(id->get<std::string>());
}

std::map<std::string, std::string> find_settings_objects(const ResourceStore& store) {
    std::map<std::string, std::string> out;
    for (const auto& uri : store.uris()) {
        const auto& body = store.body(uri);
        auto settings = body.find("@Redfish.Settings");
        if (settings == body.end() || !settings->is_object()) continue;
        auto object = settings->find("SettingsObject");
        if (object == settings->end()) continue;
        if (auto target = resolve_link(store, *object); target && *target != uri) out[*target] = uri;
    }
    // Lenovo XCC links none: its settings object is <Bios>/Pending.
    for (const auto& uri : store.uris()) {
        const auto& body = store.body(uri);
        if (body.contains("@Redfish.Settings") || body.value("@odata.type", "").rfind("#Bios.", 0) != 0) continue;
        if (auto pending = store.resolve(uri + "/Pending")) out[*pending] = uri;
    }
    return out;
}

std::optional<RedfishMessage> check_pending_attributes(const nlohmann::json& current, const nlohmann::json& pending) {
    if (!pending.is_object()) return messages::property_value_type_error(pending.dump(), "Attributes");
    for (const auto& [name, value] : pending.items()) {
        auto now = current.find(name);
        if (now == current.end()) return messages::property_unknown("Attributes/" + name);
        // Null is how registries spell "no value yet"; anything else keeps its type.
        if (!now->is_null() && !value.is_null() && json_kind(*now) != json_kind(value)) {
            return messages::property_value_type_error(value.dump(), "Attributes/" + name);
        }
    }
    return std::nullopt;
}

std::optional<BiosApply> apply_pending_bios(const ResourceStore& store, const std::string& system_uri,
                                            const std::string& now) {
    const auto& system = store.body(system_uri);
    auto bios_link = system.find("Bios");
    if (bios_link == system.end()) return std::nullopt;
    auto bios_uri = resolve_link(store, *bios_link);
    if (!bios_uri) return std::nullopt;
    BiosApply out;
    out.bios_uri = *bios_uri;
    out.bios = store.body(*bios_uri);
    auto settings = out.bios.find("@Redfish.Settings");
    const bool linked = settings != out.bios.end() && settings->is_object() && settings->contains("SettingsObject");
    // Unlinked: Lenovo's <Bios>/Pending, where the tree has one.
    auto settings_uri =
        linked ? resolve_link(store, (*settings)["SettingsObject"]) : store.resolve(*bios_uri + "/Pending");
    if (!settings_uri) return std::nullopt;
    out.settings_uri = *settings_uri;
    out.settings = store.body(*settings_uri);
    auto pending = out.settings.find("Attributes");
    if (pending == out.settings.end() || !pending->is_object() || pending->empty()) return std::nullopt;

    if (linked) {
        out.bios["@Redfish.Settings"]["Time"] = now;
        out.bios["@Redfish.Settings"]["Messages"] = nlohmann::json::array({{{"MessageId", "Base.1.8.Success"}}});
    }
    if (!out.bios["Attributes"].is_object()) out.bios["Attributes"] = nlohmann::json::object();
    for (const auto& [name, value] : pending->items()) out.bios["Attributes"][name] = value;
    out.settings["Attributes"] = nlohmann::json::object();
    out.settings.erase("@Redfish.SettingsApplyTime");  // used up with the set it governed
    return out;
}

}  // namespace kiln::bmc
