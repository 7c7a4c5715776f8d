#include "provisioner/evidence/bmc_evidence.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "firmware/stage/bmc_inventory.h"

namespace kiln::evidence {

using nlohmann::json;
using redfish::JsonView;

namespace {

// The members of the collection a resource links to under `key` ("" when
// there is no such link); an error names the resource.
Result<std::vector<std::string>> linked_members(redfish::Client& client, const JsonView& from, const char* key,
                                                bool* present = nullptr) {
    auto link = from.opt_link(key);
    if (!link) return link.error();
    if (present) *present = !link->empty();
    if (link->empty()) return std::vector<std::string>{};
    auto coll = client.get(*link);
    if (!coll) return coll.error();
    return coll->view().members();
}

// "/redfish/v1/Systems/1/LogServices/IML" -> "Systems-1-IML".
std::string dump_name(const std::string& owner_uri, const std::string& service_uri) {
    auto last = [](const std::string& u) {
        std::string s = u;
        while (!s.empty() && s.back() == '/') s.pop_back();
        auto p = s.rfind('/');
        return p == std::string::npos ? s : s.substr(p + 1);
    };
    std::string owner = owner_uri.find("/Managers/") != std::string::npos ? "Managers" : "Systems";
    std::string name = owner + "-" + last(owner_uri) + "-" + last(service_uri);
    for (auto& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    return name;
}

// A member written inline ({"@odata.id", "Id", "Message", ...}) or as a bare
// link that must be read.
bool bare_link(const json& m) {
    return m.is_object() && m.size() == 1 && m.contains("@odata.id");
}

// Every entry of a LogService's Entries, page after page (Members@odata.nextLink,
// or the @odata.nextLink the DMTF mockups use), up to the caps. A page link
// seen before ends the walk: a service that ignores $skiptoken would loop.
json read_entries(redfish::Client& client, const std::string& entries_uri, const BmcEvidenceOptions& o) {
    json entries = json::array();
    json problems = json::array();
    bool truncated = false;
    std::set<std::string> seen_pages, seen_entries;
    std::string page = entries_uri;
    for (size_t n = 0; !page.empty(); ++n) {
        if (n >= o.max_pages) {
            truncated = true;
            break;
        }
        if (!seen_pages.insert(page).second) break;
        auto r = client.get(page);
        if (!r) {
            problems.push_back(r.error().message);
            break;
        }
        const json& body = r->body;
        if (!body.contains("Members") || !body["Members"].is_array()) {
            problems.push_back(fmt::format("GET {}: no Members array", page));
            break;
        }
        for (const auto& m : body["Members"]) {
            if (entries.size() >= o.max_entries) {
                truncated = true;
                break;
            }
            const std::string id = m.is_object() && m.contains("@odata.id") && m["@odata.id"].is_string()
                                       ? m["@odata.id"].get<std::string>()
                                       : "";
            if (!id.empty() && !seen_entries.insert(id).second) continue;
            if (!bare_link(m)) {
                entries.push_back(m);
                continue;
            }
            auto e = client.get(id);
            if (e)
                entries.push_back(e->body);
            else
                problems.push_back(e.error().message);
        }
        if (truncated) break;
        std::string next;
        for (const char* key : {"Members@odata.nextLink", "@odata.nextLink"})
            if (body.contains(key) && body[key].is_string()) next = body[key].get<std::string>();
        page = next;
    }
    return {{"entries", entries}, {"truncated", truncated}, {"problems", problems}};
}

// The log services of one system or manager, appended to `out`. False with
// `why` when the resource has none.
void read_log_services(redfish::Client& client, const std::string& owner_uri, const BmcEvidenceOptions& o,
                       std::vector<LogServiceDump>& out, std::vector<std::string>& why) {
    auto owner = client.get(owner_uri);
    if (!owner) {
        why.push_back(owner.error().message);
        return;
    }
    bool present = false;
    auto services = linked_members(client, owner->view(), "LogServices", &present);
    if (!services) {
        why.push_back(services.error().message);
        return;
    }
    if (!present) {
        why.push_back(owner_uri + " has no LogServices");
        return;
    }
    for (const auto& uri : *services) {
        auto svc = client.get(uri);
        if (!svc) {
            why.push_back(svc.error().message);
            continue;
        }
        auto entries = svc->view().opt_link("Entries");
        if (!entries || entries->empty()) {
            why.push_back(uri + " has no Entries");
            continue;
        }
        json doc = read_entries(client, *entries, o);
        doc["service"] = svc->body;
        out.push_back({dump_name(owner_uri, uri), uri, std::move(doc)});
    }
}

json pick(const json& from, std::initializer_list<const char*> keys) {
    json out = json::object();
    for (const char* k : keys)
        if (from.is_object() && from.contains(k)) out[k] = from[k];
    return out;
}

json read_parts(redfish::Client& client, const JsonView& root, const std::string& system_uri,
                const BmcEvidenceOptions& o, std::vector<std::string>& problems) {
    json chassis_out = json::array(), devices = json::array(), assemblies = json::array();
    auto add_device = [&](const std::string& uri) {
        auto d = client.get(uri);
        if (!d) {
            problems.push_back(d.error().message);
            return;
        }
        json item = pick(d->body, {"Id", "Name", "Manufacturer", "Model", "SerialNumber", "PartNumber", "SKU",
                                   "FirmwareVersion", "DeviceType", "PCIeInterface", "Status"});
        item["uri"] = uri;
        devices.push_back(std::move(item));
    };
    auto chassis = linked_members(client, root, "Chassis");
    if (!chassis) problems.push_back(chassis.error().message);
    for (const auto& c : chassis ? *chassis : std::vector<std::string>{}) {
        auto ch = client.get(c);
        if (!ch) {
            problems.push_back(ch.error().message);
            continue;
        }
        json item = pick(ch->body, {"Id", "Name", "Manufacturer", "Model", "SerialNumber", "PartNumber", "SKU",
                                    "AssetTag", "ChassisType"});
        item["uri"] = c;
        chassis_out.push_back(std::move(item));
        JsonView cv = ch->view();
        auto pcie = linked_members(client, cv, "PCIeDevices");
        if (!pcie)
            problems.push_back(pcie.error().message);
        else
            for (size_t i = 0; i < pcie->size() && i < o.max_devices; ++i) add_device((*pcie)[i]);
        auto asm_link = cv.opt_link("Assembly");
        if (asm_link && !asm_link->empty()) {
            auto a = client.get(*asm_link);
            if (!a) {
                problems.push_back(a.error().message);
            } else if (a->body.contains("Assemblies") && a->body["Assemblies"].is_array()) {
                for (const auto& part : a->body["Assemblies"]) {
                    json p = pick(
                        part, {"Name", "Description", "Model", "PartNumber", "SparePartNumber", "SKU", "SerialNumber",
                               "Producer", "ProductionDate", "Vendor", "Version", "EngineeringChangeLevel", "Status"});
                    p["chassis"] = c;
                    assemblies.push_back(std::move(p));
                }
            }
        }
    }
    // Older services list the system's devices as an array of links.
    if (!system_uri.empty()) {
        if (auto sys = client.get(system_uri);
            sys && sys->body.contains("PCIeDevices") && sys->body["PCIeDevices"].is_array()) {
            for (const auto& l : sys->body["PCIeDevices"]) {
                if (devices.size() >= o.max_devices) break;
                if (!l.is_object() || !l.contains("@odata.id") || !l["@odata.id"].is_string()) continue;
                const auto uri = l["@odata.id"].get<std::string>();
                const bool known = std::any_of(devices.begin(), devices.end(),
                                               [&](const json& d) { return d.value("uri", "") == uri; });
                if (!known) add_device(uri);
            }
        }
    }
    return {{"chassis", chassis_out}, {"pcie_devices", devices}, {"assemblies", assemblies}};
}

json read_tasks(redfish::Client& client, const JsonView& root, const BmcEvidenceOptions& o, std::string& why) {
    auto ts = root.opt_link("Tasks");
    if (!ts) {
        why = ts.error().message;
        return nullptr;
    }
    if (ts->empty()) {
        why = "the service root has no TaskService";
        return nullptr;
    }
    auto svc = client.get(*ts);
    if (!svc) {
        why = svc.error().message;
        return nullptr;
    }
    bool present = false;
    auto members = linked_members(client, svc->view(), "Tasks", &present);
    if (!members) {
        why = members.error().message;
        return nullptr;
    }
    if (!present) {
        why = *ts + " has no Tasks collection";
        return nullptr;
    }
    json tasks = json::array();
    const size_t first = members->size() > o.max_tasks ? members->size() - o.max_tasks : 0;
    json problems = json::array();
    for (size_t i = first; i < members->size(); ++i) {
        auto t = client.get((*members)[i]);
        if (t)
            tasks.push_back(t->body);
        else
            problems.push_back(t.error().message);
    }
    return {{"tasks", tasks}, {"left_out", first}, {"problems", problems}};
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : "; ") + s;
    return out;
}

// A hostile reply (a wrong type deep in a body) costs that part, not the bundle.
template <class Fn>
void guarded(BmcEvidence& ev, const char* part, Fn&& fn) {
    try {
        fn();
    } catch (...) {
        ev.unavailable.emplace_back(part, "unreadable reply: " + redfish::current_exception_summary());
    }
}

}  // namespace

Result<BmcEvidence> collect_bmc_evidence(redfish::Client& client, const BmcEvidenceOptions& o) {
    auto root_r = client.service_root();
    if (!root_r) return root_r.error();
    const json root_body = root_r->body;
    const JsonView root(root_body, "GET /redfish/v1/");
    BmcEvidence ev;

    // The node's system and every manager: the owners of log services.
    std::string system_uri = o.system_uri;
    std::vector<std::string> owners;
    guarded(ev, "bmc.log_services", [&] {
        std::vector<std::string> why;
        if (system_uri.empty()) {
            auto systems = linked_members(client, root, "Systems");
            if (!systems)
                why.push_back(systems.error().message);
            else if (!systems->empty())
                system_uri = systems->front();
        }
        if (!system_uri.empty()) owners.push_back(system_uri);
        auto managers = linked_members(client, root, "Managers");
        if (!managers)
            why.push_back(managers.error().message);
        else
            owners.insert(owners.end(), managers->begin(), managers->end());
        for (const auto& owner : owners) read_log_services(client, owner, o, ev.logs, why);
        if (ev.logs.empty())
            ev.unavailable.emplace_back("bmc.log_services",
                                        why.empty() ? "the BMC offers no log service" : joined(why));
    });
    guarded(ev, "bmc.tasks", [&] {
        std::string why;
        ev.tasks = read_tasks(client, root, o, why);
        if (ev.tasks.is_null()) ev.unavailable.emplace_back("bmc.tasks", why);
    });
    guarded(ev, "bmc.parts", [&] {
        std::vector<std::string> problems;
        ev.parts = read_parts(client, root, system_uri, o, problems);
        ev.parts["problems"] = problems;
        if (ev.parts["chassis"].empty() && ev.parts["pcie_devices"].empty())
            ev.unavailable.emplace_back("bmc.parts", problems.empty() ? "the BMC lists no chassis" : joined(problems));
    });
    guarded(ev, "bmc.firmware", [&] {
        auto inv =
            firmware::read_inventory(client, {.bios = false, .network_adapters = true, .system_uri = o.system_uri});
        if (inv)
            ev.firmware = inv->to_json();
        else
            ev.unavailable.emplace_back("bmc.firmware", inv.error().message);
    });
    return ev;
}

}  // namespace kiln::evidence
