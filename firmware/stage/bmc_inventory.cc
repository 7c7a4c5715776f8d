#include "firmware/stage/bmc_inventory.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "firmware/stage/firmware_version.h"
#include "provisioner/net/bmc_request_tally.h"

namespace kiln::firmware {

using nlohmann::json;
using redfish::JsonView;

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Unwraps a Result or returns its error. `var` is the name it declares,
// which parentheses would not leave a declaration.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KILN_TRY(var, expr)               \
    auto var##_r = (expr);                \
    if (!var##_r) return var##_r.error(); \
    auto var = std::move(*var##_r)
// NOLINTEND(bugprone-macro-parentheses)

std::vector<std::string> string_list(const JsonView& v, const char* key) {
    std::vector<std::string> out;
    auto a = v.find(key);
    if (!a || !a->raw().is_array()) return out;
    for (const auto& s : a->raw())
        if (s.is_string()) out.push_back(s.get<std::string>());
    return out;
}

Status read_bios(redfish::Client& client, const std::string& bios_uri, const redfish::VendorProfile& profile,
                 BmcInventory& inv) {
    KILN_TRY(bios, client.get(bios_uri));
    JsonView v = bios.view();
    BiosState state;
    state.uri = bios_uri;
    KILN_TRY(registry, v.opt_str("AttributeRegistry"));
    state.registry = registry;
    KILN_TRY(attrs, v.at("Attributes"));
    if (!attrs.raw().is_object()) return attrs.wrong_type("an object");
    state.attributes = attrs.raw();
    if (auto settings = v.find("@Redfish.Settings")) {
        KILN_TRY(so, settings->opt_link("SettingsObject"));
        state.settings_uri = so;
        state.apply_times = string_list(*settings, "SupportedApplyTimes");
    }
    if (state.settings_uri.empty() && !profile.settings_fallback_suffix.empty()) {
        std::string base = bios_uri;
        while (!base.empty() && base.back() == '/') base.pop_back();
        state.settings_uri = base + profile.settings_fallback_suffix;
    }
    if (!state.settings_uri.empty()) {
        auto s = client.get_any(state.settings_uri);
        if (!s) return s.error();
        if (s->ok() && s->body.is_object()) {
            JsonView sv = s->view();
            if (auto pa = sv.find("Attributes")) {
                if (!pa->raw().is_object()) return pa->wrong_type("an object");
                for (auto it = pa->raw().begin(); it != pa->raw().end(); ++it) {
                    auto cur = state.attributes.find(it.key());
                    if (cur == state.attributes.end() || *cur != it.value()) state.pending[it.key()] = it.value();
                }
            }
        } else if (s->status != 404) {
            return redfish::status_error(*s);
        } else if (!profile.settings_fallback_suffix.empty()) {
            state.settings_uri.clear();  // the fallback guess was wrong
        }
    }
    inv.bios = std::move(state);
    return ok_status();
}

// One optional part could not be read: the rest of the inventory stands.
void degrade(BmcInventory& inv, const char* part, const Error& e) {
    inv.warnings.push_back({part, e.message, e.transient});
}

// An action's allowable values for `parameter`: inline
// (`<parameter>@Redfish.AllowableValues`), else from the action's
// `@Redfish.ActionInfo` resource (Parameters[Name].AllowableValues), which
// many BMCs use instead. Empty when neither says; an ActionInfo that cannot
// be read is a warning.
std::vector<std::string> allowable_values(redfish::Client& client, const JsonView& action, const std::string& parameter,
                                          BmcInventory& inv) {
    auto inline_values = string_list(action, (parameter + "@Redfish.AllowableValues").c_str());
    if (!inline_values.empty()) return inline_values;
    // DSP0266 writes it as a URI string; some BMCs as a link object.
    std::string info_uri;
    if (auto plain = action.opt_str("@Redfish.ActionInfo"))
        info_uri = *plain;
    else if (auto link = action.opt_link("@Redfish.ActionInfo"))
        info_uri = *link;
    if (info_uri.empty() || info_uri[0] != '/') return {};
    auto info = client.get(info_uri);
    if (!info) {
        degrade(inv, "action_info", info.error());
        return {};
    }
    auto params = info->view().find("Parameters");
    if (!params) return {};
    auto list = params->array();
    if (!list) return {};
    for (const auto& p : *list) {
        auto name = p.opt_str("Name");
        if (name && *name == parameter) return string_list(p, "AllowableValues");
    }
    return {};
}

// The same device already listed (a NIC in FirmwareInventory and under
// NetworkAdapters, a member in both Firmware- and SoftwareInventory): the
// same resource, or, seen through another collection, the same Id or Name
// at the same version. Members of one collection are distinct devices even
// with one name and version (eight GPUs).
bool already_listed(const BmcInventory& inv, const FirmwareItem& item) {
    return std::any_of(inv.components.begin(), inv.components.end(), [&](const FirmwareItem& f) {
        if (!item.uri.empty() && f.uri == item.uri) return true;
        if (f.source == item.source) return false;
        const bool same_device = (!item.id.empty() && lower(f.id) == lower(item.id)) ||
                                 (!item.name.empty() && lower(f.name) == lower(item.name));
        return same_device && same_version(f.version, item.version, inv.vendor);
    });
}

Status read_network_adapter(redfish::Client& client, const redfish::Client::Member& member, BmcInventory& inv) {
    const std::string& uri = member.uri;
    KILN_TRY(adapter, client.read(member));
    JsonView a = adapter.view();
    KILN_TRY(id, a.opt_str("Id"));
    KILN_TRY(name, a.opt_str("Name"));
    std::string version;
    if (auto ctrls = a.find("Controllers")) {
        KILN_TRY(list, ctrls->array());
        for (const auto& ctl : list) {
            KILN_TRY(fw, ctl.opt_str("FirmwarePackageVersion"));
            if (!fw.empty()) {
                version = fw;
                break;
            }
        }
    }
    if (version.empty()) return ok_status();
    FirmwareItem item{id, name, version, uri, "network_adapter", {}};
    if (!already_listed(inv, item)) inv.components.push_back(std::move(item));
    return ok_status();
}

// Every chassis's NetworkAdapters; a chassis or adapter that cannot be read
// is a warning, the others are still read.
void read_network_adapters(redfish::Client& client, const std::vector<redfish::Client::Member>& chassis,
                           BmcInventory& inv) {
    for (const auto& c : chassis) {
        auto ch = client.read(c);
        if (!ch) {
            degrade(inv, "network_adapters", ch.error());
            continue;
        }
        auto na = ch->view().opt_link("NetworkAdapters");
        if (!na) {
            degrade(inv, "network_adapters", na.error());
            continue;
        }
        if (na->empty()) continue;
        auto members = client.members(*na);
        if (!members) {
            degrade(inv, "network_adapters", members.error());
            continue;
        }
        for (const auto& m : *members)
            if (auto st = read_network_adapter(client, m, inv); !st) degrade(inv, "network_adapters", st.error());
    }
}

// The members of a FirmwareInventory or SoftwareInventory collection, each
// read on its own: one bad member is a warning, not a missing inventory.
void read_inventory_collection(redfish::Client& client, const std::string& uri, const char* part, const char* source,
                               BmcInventory& inv) {
    auto members = client.members(uri);
    if (!members) {
        degrade(inv, part, members.error());
        return;
    }
    for (const auto& member : *members) {
        const std::string& m = member.uri;
        auto item = client.read(member);
        if (!item) {
            degrade(inv, part, item.error());
            continue;
        }
        JsonView iv = item->view();
        auto id = iv.opt_str("Id");
        auto name = id ? iv.opt_str("Name") : id;
        auto version = name ? iv.opt_str("Version") : name;
        if (!version) {
            degrade(inv, part, version.error());
            continue;
        }
        FirmwareItem f{*id, *name, *version, m, source, {}};
        // RelatedItem: links to what the firmware belongs to (best effort:
        // entries that are not links are skipped, not fatal).
        if (auto rel = iv.find("RelatedItem"); rel && rel->raw().is_array())
            for (const auto& r : rel->raw())
                if (r.is_object() && r.contains("@odata.id") && r["@odata.id"].is_string())
                    f.related.push_back(r["@odata.id"].get<std::string>());
        if (!already_listed(inv, f)) inv.components.push_back(std::move(f));
    }
}

// The first CD/DVD member of a VirtualMedia collection, if any.
Status read_virtual_media(redfish::Client& client, const std::string& collection, BmcInventory& inv) {
    inv.virtual_media_collections.push_back(collection);
    KILN_TRY(members, client.members(collection));
    for (const auto& member : members) {
        const std::string& m = member.uri;
        KILN_TRY(media, client.read(member));
        JsonView v = media.view();
        VirtualMediaSlot slot;
        slot.uri = m;
        slot.media_types = string_list(v, "MediaTypes");
        bool cd = std::any_of(slot.media_types.begin(), slot.media_types.end(),
                              [](const std::string& t) { return t == "CD" || t == "DVD"; });
        if (!cd) continue;
        KILN_TRY(image, v.opt_str("Image"));
        slot.image = image;
        slot.inserted = !image.empty();
        if (auto ins = v.find("Inserted")) {
            KILN_TRY(b, ins->boolean());
            slot.inserted = b;
        }
        if (auto actions = v.find("Actions")) {
            if (auto a = actions->find("#VirtualMedia.InsertMedia")) {
                KILN_TRY(t, a->str("target"));
                slot.insert_target = t;
            }
            if (auto a = actions->find("#VirtualMedia.EjectMedia")) {
                KILN_TRY(t, a->str("target"));
                slot.eject_target = t;
            }
        }
        inv.cd = std::move(slot);
        return ok_status();
    }
    return ok_status();
}

}  // namespace

bool version_matches(const std::string& reported, const std::string& desired, const std::string& vendor) {
    if (same_version(reported, desired, vendor)) return true;
    // The desired release followed by a build tag: "1.46.0" vs "1.46.0-kiln".
    if (desired.empty() || reported.size() <= desired.size() || reported.compare(0, desired.size(), desired) != 0)
        return false;
    char next = reported[desired.size()];
    return next == ' ' || next == '(' || next == '-' || next == '_';
}

namespace {

Result<BmcInventory> read_inventory_unguarded(redfish::Client& client, const InventoryOptions& options) {
    BmcInventory inv;
    KILN_TRY(root, client.service_root());
    // Collections are read with their members inline where the service offers $expand.
    client.set_expand(redfish::expand_query_for(root.body));
    inv.expand_query = client.expand();
    JsonView r = root.view();
    KILN_TRY(systems_uri, r.link("Systems"));
    KILN_TRY(managers_uri, r.opt_link("Managers"));
    KILN_TRY(chassis_uri, r.opt_link("Chassis"));
    KILN_TRY(update_uri, r.opt_link("UpdateService"));
    KILN_TRY(tasks_uri, r.opt_link("Tasks"));
    KILN_TRY(registries_uri, r.opt_link("Registries"));
    inv.registries_uri = registries_uri;

    json manager_body;
    if (!managers_uri.empty()) {
        // Optional: a BMC without a readable manager has no BMC version to
        // offer, but everything else is still there.
        auto read_manager = [&]() -> Status {
            KILN_TRY(mm, client.members(managers_uri));
            if (mm.empty()) return ok_status();
            inv.manager_uri = mm.front().uri;
            KILN_TRY(mgr, client.read(mm.front()));
            KILN_TRY(fw, mgr.view().opt_str("FirmwareVersion"));
            inv.bmc_version = fw;
            manager_body = mgr.body;
            return ok_status();
        };
        if (auto st = read_manager(); !st) degrade(inv, "manager", st.error());
    }
    const redfish::VendorProfile& profile = redfish::detect_vendor(root.body, manager_body);
    inv.vendor = profile.name;
    // Every later exchange with this BMC counts under its vendor (metrics).
    net::BmcRequestTally::process().identify(client.session().origin(), profile.name);

    KILN_TRY(system_members, client.members(systems_uri));
    std::vector<std::string> sm;
    for (const auto& m : system_members) sm.push_back(m.uri);
    if (sm.empty())
        return make_error("redfish", "redfish.missing", fmt::format("GET {}: no ComputerSystem members", systems_uri));
    inv.system_uri = sm.front();
    if (!options.system_uri.empty()) {
        // Compared without a trailing slash: /Systems/1 and /Systems/1/ are one.
        auto bare = [](std::string u) {
            while (u.size() > 1 && u.back() == '/') u.pop_back();
            return u;
        };
        auto it = std::find_if(sm.begin(), sm.end(),
                               [&](const std::string& m) { return bare(m) == bare(options.system_uri); });
        if (it == sm.end())
            return make_error("redfish", "redfish.missing",
                              fmt::format("GET {}: the node's system {} is not a member (members: {})", systems_uri,
                                          options.system_uri, fmt::join(sm, ", ")));
        inv.system_uri = *it;
    }
    const auto chosen = std::find_if(system_members.begin(), system_members.end(),
                                     [&](const redfish::Client::Member& m) { return m.uri == inv.system_uri; });
    KILN_TRY(sys, client.read(*chosen));
    JsonView s = sys.view();
    KILN_TRY(bv, s.opt_str("BiosVersion"));
    inv.bios_version = bv;
    KILN_TRY(ps, s.opt_str("PowerState"));
    inv.power_state = ps;
    if (auto boot = s.find("Boot")) {
        KILN_TRY(t, boot->opt_str("BootSourceOverrideTarget"));
        KILN_TRY(e, boot->opt_str("BootSourceOverrideEnabled"));
        inv.boot_target = t;
        inv.boot_enabled = e;
        inv.boot_targets = string_list(*boot, "BootSourceOverrideTarget@Redfish.AllowableValues");
    }
    if (auto actions = s.find("Actions")) {
        if (auto reset = actions->find("#ComputerSystem.Reset")) {
            KILN_TRY(target, reset->str("target"));
            inv.reset_target = target;
            inv.reset_types = allowable_values(client, *reset, "ResetType", inv);
        }
    }

    if (!update_uri.empty()) {
        std::string firmware_inv, software_inv;
        auto read_update_service = [&]() -> Status {
            KILN_TRY(us, client.get(update_uri));
            JsonView u = us.view();
            KILN_TRY(fi, u.opt_link("FirmwareInventory"));
            KILN_TRY(si, u.opt_link("SoftwareInventory"));
            firmware_inv = fi;
            software_inv = si;
            KILN_TRY(mp, u.opt_str("MultipartHttpPushUri"));
            inv.multipart_uri = mp;
            if (auto opts = u.find("MultipartHttpPushUriOptions"))
                if (auto at = opts->find("UpdateApplyTime"))
                    inv.update_apply_times = string_list(*at, "ApplyTime@Redfish.AllowableValues");
            if (auto actions = u.find("Actions")) {
                if (auto su = actions->find("#UpdateService.SimpleUpdate")) {
                    KILN_TRY(target, su->str("target"));
                    inv.simple_update_target = target;
                    inv.transfer_protocols = allowable_values(client, *su, "TransferProtocol", inv);
                    if (auto support = su->find("@Redfish.OperationApplyTimeSupport"))
                        inv.simple_update_apply_times = string_list(*support, "SupportedValues");
                }
            }
            return ok_status();
        };
        if (auto st = read_update_service(); !st) degrade(inv, "update_service", st.error());
        if (!firmware_inv.empty())
            read_inventory_collection(client, firmware_inv, "firmware_inventory", "inventory", inv);
        // Some services (Intel) list firmware only here.
        if (!software_inv.empty() && options.software_inventory)
            read_inventory_collection(client, software_inv, "software_inventory", "software_inventory", inv);
    }
    if (!tasks_uri.empty()) {
        auto ts = client.get_any(tasks_uri);
        if (ts && ts->ok() && ts->body.is_object()) {
            auto t = ts->view().opt_link("Tasks");
            if (t) inv.tasks_uri = *t;
        }
    }
    if (options.network_adapters && !chassis_uri.empty()) {
        auto cm = client.members(chassis_uri);
        if (cm)
            read_network_adapters(client, *cm, inv);
        else
            degrade(inv, "network_adapters", cm.error());
    }
    if (options.virtual_media) {
        inv.virtual_media_read = true;
        // The system's first (DSP0266 moved VirtualMedia there), then the manager's.
        KILN_TRY(sys_vm, s.opt_link("VirtualMedia"));
        if (!sys_vm.empty())
            if (auto st = read_virtual_media(client, sys_vm, inv); !st) return st.error();
        if (!inv.cd && !manager_body.is_null()) {
            KILN_TRY(mgr_vm, JsonView(manager_body, "GET " + inv.manager_uri).opt_link("VirtualMedia"));
            if (!mgr_vm.empty())
                if (auto st = read_virtual_media(client, mgr_vm, inv); !st) return st.error();
        }
    }
    if (options.bios) {
        auto bios_uri = s.opt_link("Bios");
        if (!bios_uri)
            degrade(inv, "bios", bios_uri.error());
        else if (!bios_uri->empty())
            if (auto st = read_bios(client, *bios_uri, profile, inv); !st) degrade(inv, "bios", st.error());
    }
    return inv;
}

}  // namespace

// A public entry point (`kiln firmware inventory` calls it directly): no
// exception leaves it, whatever the BMC sent, and its messages are valid
// UTF-8 for the JSON outputs.
Result<BmcInventory> read_inventory(redfish::Client& client, const InventoryOptions& options) {
    std::string why;
    try {
        auto inv = read_inventory_unguarded(client, options);
        if (inv) return inv;
        Error e = inv.error();
        e.message = redfish::valid_utf8(e.message);
        return e;
    } catch (...) {
        why = redfish::current_exception_summary();
    }
    return make_error(
        "redfish", "redfish.unreadable_reply",
        fmt::format("{}: inventory stopped by a reply kiln cannot read ({})", client.session().origin(), why));
}

std::optional<FirmwareItem> find_component(const BmcInventory& inv, const std::string& name) {
    std::string want = lower(name);
    for (const auto& c : inv.components)
        if (lower(c.id) == want || lower(c.name) == want) return c;
    auto member_at = [&](const std::string& v) -> std::optional<FirmwareItem> {
        for (const auto& c : inv.components)
            if (!v.empty() && c.version == v) return c;
        return std::nullopt;
    };
    if (want == "bios" && !inv.bios_version.empty()) {
        FirmwareItem item = member_at(inv.bios_version).value_or(FirmwareItem{});
        item.id = item.id.empty() ? "BIOS" : item.id;
        item.name = item.name.empty() ? "BIOS" : item.name;
        item.version = inv.bios_version;
        if (item.source.empty()) item.source = "system";
        return item;
    }
    if (want == "bmc" && !inv.bmc_version.empty()) {
        FirmwareItem item = member_at(inv.bmc_version).value_or(FirmwareItem{});
        item.id = item.id.empty() ? "BMC" : item.id;
        item.name = item.name.empty() ? "BMC" : item.name;
        item.version = inv.bmc_version;
        if (item.source.empty()) item.source = "manager";
        return item;
    }
    if (want == "nic") {
        for (const auto& c : inv.components)
            if (c.source == "network_adapter") return c;
    }
    return std::nullopt;
}

std::map<std::string, std::vector<std::string>> read_bios_registry(redfish::Client& client, const BmcInventory& inv) {
    std::map<std::string, std::vector<std::string>> out;
    if (!inv.bios || inv.bios->registry.empty() || inv.registries_uri.empty()) return out;
    auto coll = client.get(inv.registries_uri);
    if (!coll) return out;
    auto members = coll->view().members();
    if (!members) return out;
    for (const auto& m : *members) {
        // Member ids carry the registry name ("BiosAttributeRegistryA43.v1_2_52").
        if (lower(m).find(lower(inv.bios->registry)) == std::string::npos) continue;
        auto file = client.get(m);
        if (!file) return out;
        auto locations = file->view().find("Location");
        if (!locations || !locations->raw().is_array()) return out;
        for (const auto& loc : locations->raw()) {
            if (!loc.is_object() || !loc.contains("Uri") || !loc["Uri"].is_string()) continue;
            if (loc.contains("Language") && loc["Language"] != "en") continue;
            auto reg = client.get(loc["Uri"].get<std::string>());
            if (!reg) continue;
            const json& body = reg->body;
            if (!body.contains("RegistryEntries") || !body["RegistryEntries"].is_object()) continue;
            const json& attrs = body["RegistryEntries"].value("Attributes", json::array());
            if (!attrs.is_array()) continue;
            for (const auto& a : attrs) {
                if (!a.is_object() || !a.contains("AttributeName") || !a["AttributeName"].is_string()) continue;
                auto& values = out[a["AttributeName"].get<std::string>()];
                if (a.contains("Value") && a["Value"].is_array())
                    for (const auto& v : a["Value"])
                        if (v.is_object() && v.contains("ValueName") && v["ValueName"].is_string())
                            values.push_back(v["ValueName"].get<std::string>());
            }
            return out;
        }
    }
    return out;
}

std::string BmcInventory::warnings_about(const std::string& part) const {
    std::string out;
    for (const auto& w : warnings)
        if (w.part == part) out += (out.empty() ? "" : "; ") + w.message;
    return out;
}

json BmcInventory::to_json() const {
    json comps = json::array();
    for (const auto& c : components)
        comps.push_back({{"id", c.id},
                         {"name", c.name},
                         {"version", c.version},
                         {"uri", c.uri},
                         {"source", c.source},
                         {"related", c.related}});
    json j = {{"vendor", vendor},
              {"system", system_uri},
              {"manager", manager_uri},
              {"bios_version", bios_version},
              {"bmc_version", bmc_version},
              {"components", comps},
              {"power_state", power_state},
              {"boot", {{"target", boot_target}, {"enabled", boot_enabled}, {"targets", boot_targets}}},
              {"update", {{"simple_update", simple_update_target}, {"multipart", multipart_uri}}}};
    json warns = json::array();
    for (const auto& w : warnings) warns.push_back({{"part", w.part}, {"message", w.message}});
    j["warnings"] = warns;
    if (virtual_media_read) {
        j["virtual_media"] = nullptr;
        if (cd)
            j["virtual_media"] = {{"uri", cd->uri},
                                  {"image", cd->image},
                                  {"inserted", cd->inserted},
                                  {"insert", cd->insert_target},
                                  {"eject", cd->eject_target},
                                  {"media_types", cd->media_types}};
        j["virtual_media_collections"] = virtual_media_collections;
    }
    if (bios)
        j["bios"] = {{"uri", bios->uri},
                     {"settings", bios->settings_uri},
                     {"registry", bios->registry},
                     {"attributes", bios->attributes},
                     {"pending", bios->pending}};
    return j;
}

}  // namespace kiln::firmware
