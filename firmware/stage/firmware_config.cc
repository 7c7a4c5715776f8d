#include "firmware/stage/firmware_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "provisioner/config/toml_reader.h"
#include "provisioner/core/host_port.h"

namespace kiln::firmware {

namespace {

using config::TableReader;
using config::TableScope;

// A sha256 key: 64 hex digits, kept lowercase; "" after an error.
std::string sha256_key(TableReader& r, const std::string& key, const std::string& value) {
    if (!config::is_sha256_hex(value)) {
        r.ctx().error(r.table().get(key)->source(), r.key_path(key),
                      fmt::format("expected 64 hex digits, found {} characters", value.size()));
        return "";
    }
    return config::ascii_lower(value);
}

FirmwareComponent read_component(TableReader& cr, TableScope& scope) {
    FirmwareComponent c;
    c.pos = cr.pos();
    if (auto v = cr.str("name", true)) c.name = *v;
    if (auto v = cr.str("version", true)) c.version = *v;
    if (auto v = cr.str("match")) c.match = *v;
    if (auto v = cr.str("related_item")) {
        if (v->rfind("/redfish/", 0) != 0)
            cr.ctx().error(cr.table().get("related_item")->source(), cr.key_path("related_item"),
                           "expected a Redfish path starting with /redfish/");
        else
            c.related_item = *v;
    }
    if (auto v = cr.str("artifact", true)) c.artifact = scope.path(*v);
    if (auto v = cr.str("sha256", true)) c.sha256 = sha256_key(cr, "sha256", *v);
    return c;
}

FirmwareProfile read_firmware(const std::string& name, TableReader& r, TableScope& scope) {
    FirmwareProfile p;
    p.name = name;
    p.pos = r.pos();
    if (auto v = r.choice("apply_time", {"Immediate", "OnReset"})) p.apply_time = *v;
    if (const toml::array* comps = r.array("components", true)) {
        for (size_t i = 0; i < comps->size(); ++i) {
            const toml::node& n = *comps->get(i);
            const std::string path = fmt::format("{}.components[{}]", r.path(), i);
            if (!n.is_table()) {
                r.ctx().error(n.source(), path, fmt::format("expected table, found {}", config::toml_type_name(n)));
                continue;
            }
            TableReader cr(r.ctx(), *n.as_table(), path);
            p.components.push_back(read_component(cr, scope));
            cr.finish();
        }
    }
    return p;
}

HostOsImage read_host_os(const std::string& name, TableReader& r, TableScope& scope) {
    HostOsImage h;
    h.name = name;
    h.pos = r.pos();
    if (auto v = r.str("image", true)) h.image = scope.path(*v);
    if (auto v = r.str("sha256", true)) h.sha256 = sha256_key(r, "sha256", *v);
    return h;
}

BiosProfile read_bios(const std::string& name, TableReader& r, TableScope&) {
    BiosProfile p;
    p.name = name;
    p.pos = r.pos();
    p.sriov = r.boolean("sriov");
    p.iommu = r.boolean("iommu");
    p.acs = r.boolean("acs");
    p.above_4g_decoding = r.boolean("above_4g_decoding");
    if (const toml::table* attrs = r.table("attributes")) {
        for (const auto& [k, v] : *attrs) {
            const std::string key(k.str());
            if (v.is_string())
                p.extra[key] = *v.value<std::string>();
            else if (v.is_integer())
                p.extra[key] = std::to_string(*v.value<int64_t>());
            else if (v.is_boolean())
                p.extra[key] = *v.value<bool>() ? "true" : "false";
            else
                r.ctx().error(v.source(), r.key_path("attributes." + key),
                              fmt::format("expected string, integer or boolean, found {}", config::toml_type_name(v)));
        }
    }
    return p;
}

// "10.0.0.5:8080", "127.0.0.1:0": what the artifact server can bind.
bool valid_ipv4_listen(const std::string& text) {
    const auto hp = parse_host_port(text);
    return hp && is_ipv4(hp->host);
}

ArtifactServerTable read_artifact_server(TableReader& r) {
    ArtifactServerTable a;
    a.pos = r.pos();
    const toml::table& t = r.table();
    if (auto v = r.str("listen")) {
        if (!valid_ipv4_listen(*v))
            r.ctx().error(t.get("listen")->source(), r.key_path("listen"),
                          fmt::format("expected an IPv4 HOST:PORT such as \"10.0.0.5:8080\", found '{}'", *v));
        a.listen = *v;
    }
    if (auto v = r.str("advertise")) {
        if (auto problem = config::http_url_problem(*v); !problem.empty())
            r.ctx().error(t.get("advertise")->source(), r.key_path("advertise"), problem);
        a.advertise = *v;
    }
    return a;
}

// A node that runs the firmware stage must say where its BMC is. Nodes are
// in the file's order, so nodes[i] names the i-th [[nodes]] table.
void check_bmc_urls(const config::Fleet& fleet, std::vector<config::Diagnostic>& errors) {
    for (size_t i = 0; i < fleet.nodes.size(); ++i) {
        const config::Node& n = fleet.nodes[i];
        if (!n.bmc.url.empty()) continue;
        auto p = fleet.pipelines.find(n.role);
        if (p == fleet.pipelines.end()) continue;
        const auto& st = p->second.stages;
        if (std::find(st.begin(), st.end(), "firmware") != st.end())
            errors.push_back({n.pos, fmt::format("nodes[{}].bmc.url", i),
                              fmt::format("required: pipeline '{}' has the firmware stage", n.role)});
    }
}

}  // namespace

std::vector<config::ConfigTable> firmware_tables() {
    auto firmware = config::named_profiles_table<FirmwareProfile>(kFirmwareTable, kFirmwareTable, read_firmware);
    firmware.check_fleet = check_bmc_urls;
    return {std::move(firmware),
            config::named_profiles_table<BiosProfile>(kBiosTable, kBiosTable, read_bios),
            config::named_profiles_table<HostOsImage>(kHostOsTable, kHostOsTable, read_host_os),
            {kArtifactServerTable, [](TableReader& r, TableScope&) -> std::any { return read_artifact_server(r); }}};
}

const config::Profiles<FirmwareProfile>* firmware_profiles(const config::Fleet& fleet) {
    return fleet.table<config::Profiles<FirmwareProfile>>(kFirmwareTable);
}
const config::Profiles<BiosProfile>* bios_profiles(const config::Fleet& fleet) {
    return fleet.table<config::Profiles<BiosProfile>>(kBiosTable);
}
const config::Profiles<HostOsImage>* host_os_images(const config::Fleet& fleet) {
    return fleet.table<config::Profiles<HostOsImage>>(kHostOsTable);
}

const FirmwareProfile* firmware_profile(const config::Fleet& fleet, const config::Node& node) {
    return fleet.picked<FirmwareProfile>(kFirmwareTable, node, kFirmwareTable);
}
const BiosProfile* bios_profile(const config::Fleet& fleet, const config::Node& node) {
    return fleet.picked<BiosProfile>(kBiosTable, node, kBiosTable);
}
const HostOsImage* host_os_image(const config::Fleet& fleet, const config::Node& node) {
    return fleet.picked<HostOsImage>(kHostOsTable, node, kHostOsTable);
}

const ArtifactServerTable* artifact_server_table(const config::Fleet& fleet) {
    return fleet.table<ArtifactServerTable>(kArtifactServerTable);
}

}  // namespace kiln::firmware
