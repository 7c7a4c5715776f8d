#include "network/host/host_scope.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network/host/host_runner.h"
#include "network/host/nic_firmware.h"
#include "network/stage/network_config.h"

namespace kiln::network::host {

namespace {

using nlohmann::json;

std::string nic_label(const std::string& nic, const std::string& ifname) {
    return nic == ifname ? nic : fmt::format("{} ({})", nic, ifname);
}

std::string item_text(const json& i) {
    const std::string observed = i.value("observed", "");
    std::string s = fmt::format("{}: {} -> {} ({})", i.value("setting", ""), observed.empty() ? "?" : observed,
                                i.value("desired", ""), i.value("outcome", ""));
    const std::string detail = i.value("detail", "");
    return detail.empty() ? s : s + ": " + detail;
}

bool is_work(const std::string& outcome) {
    return outcome == "drift" || outcome == "failed";
}

}  // namespace

HostScope host_scope_for_node(const config::Fleet& fleet, const config::Node& node) {
    HostScope s;
    if (!node.host.managed()) {
        s.why_not = fmt::format("not managed: node {} has no host table (nodes[].host), so kiln does not set its NICs",
                                node.name);
        return s;
    }
    const RoceProfile* profile = network_profile(fleet, node);
    if (!profile) {
        s.why_not = fmt::format("not managed: node {} names no network profile", node.name);
        return s;
    }
    s.managed = true;
    for (const auto& nic : node.nics) {
        HostNicTarget t;
        t.nic = nic.name;
        t.want = nic_desired_from_profile(*profile, nic.netdev());
        t.want.sriov_vfs = nic.vfs;
        if (nic.firmware && nic.vfs) {
            FirmwareWanted f{*nic.vfs > 0, *nic.vfs, true};
            // Congestion control (DCQCN) on the lossless priority; CNPs as the profile marks them.
            f.roce_cc_prio_mask = 1 << profile->lossless_priority;
            f.cnp_dscp = profile->cnp_dscp;
            f.cnp_802p_prio = profile->cnp_priority;
            f.max_acc_out_read = nic.max_acc_out_read;
            t.want.firmware = f;
        }
        s.nics.push_back(std::move(t));
    }
    return s;
}

std::string setting_group(const std::string& setting) {
    if (setting == "sriov_numvfs") return "sriov";
    if (setting.rfind("ecn ", 0) == 0) return "ecn";
    if (setting.rfind("firmware ", 0) == 0) return "firmware";
    return setting;
}

Result<std::vector<NicResult>> reconcile_host_nics(CommandRunner& runner, const config::Node& node,
                                                   const HostScope& scope, bool change) {
    std::vector<NicResult> out;
    if (!scope.managed || scope.nics.empty()) return out;
    if (auto p = probe_host(runner, node); !p) return p.error();
    // The applier wants a CommandRunner it shares; this one outlives the call.
    std::shared_ptr<CommandRunner> borrowed(&runner, [](CommandRunner*) {});
    HostNicOptions options;
    options.timeout = std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(node.host.timeout));
    HostNicApplier applier(borrowed, options);
    for (const auto& t : scope.nics) {
        auto r = change ? applier.apply(t.want) : applier.observe(t.want);
        if (!r) {
            Error e = r.error();
            e.message = fmt::format("node {} NIC {}: {}", node.name, t.nic, e.message);
            if (e.code == "network.no_such_nic" && t.nic == t.want.ifname)
                e.message += " (give the NIC's netdev as ifname in the node's nics)";
            return e;
        }
        out.push_back({t.nic, std::move(*r)});
    }
    return out;
}

json host_nics_json(const config::Node& node, const std::vector<NicResult>& results) {
    const auto& require = node.host.require;
    std::map<std::string, int> counts = {{"ok", 0},          {"changed", 0}, {"drift", 0},
                                         {"unsupported", 0}, {"failed", 0},  {"needs-reboot", 0}};
    json nics = json::array();
    for (const auto& r : results) {
        json items = json::array();
        for (const auto& i : r.report.items) {
            ++counts[to_string(i.outcome)];
            items.push_back(
                {{"setting", i.setting},
                 {"desired", i.desired},
                 {"observed", i.observed},
                 {"outcome", to_string(i.outcome)},
                 {"detail", i.detail},
                 {"required", std::find(require.begin(), require.end(), setting_group(i.setting)) != require.end()}});
        }
        nics.push_back({{"nic", r.nic}, {"ifname", r.report.ifname}, {"items", items}});
    }
    return {{"managed", true}, {"host", node.host.describe()}, {"nics", nics}, {"counts", counts}};
}

json host_not_managed_json(const std::string& why) {
    return {{"managed", false}, {"why", why}};
}

HostNicFindings host_nic_findings(const json& host_nics) {
    HostNicFindings f;
    if (!host_nics.is_object() || !host_nics.value("managed", false)) return f;
    for (const auto& n : host_nics.value("nics", json::array())) {
        const std::string label = nic_label(n.value("nic", ""), n.value("ifname", ""));
        std::vector<std::string> unsupported, firmware;
        std::string firmware_plan;
        for (const auto& i : n.value("items", json::array())) {
            const std::string outcome = i.value("outcome", "");
            const std::string setting = i.value("setting", "");
            if (is_work(outcome)) f.work.push_back(label + " " + item_text(i));
            if (outcome == "unsupported" && i.value("required", false)) {
                std::string why = i.value("detail", "");
                f.blocking.push_back(
                    fmt::format("{} {} is required (host.require) but unsupported: {}", label, setting, why));
            }
            if (outcome == "unsupported") unsupported.push_back(fmt::format("{} ({})", setting, i.value("detail", "")));
            if (outcome == "needs-reboot") {
                // "firmware SRIOV_EN" -> "SRIOV_EN False->True"
                const std::string key = setting.rfind("firmware ", 0) == 0 ? setting.substr(9) : setting;
                firmware_plan = i.value("detail", "");
                firmware.push_back(fmt::format("{} {}->{}", key, firmware_value_text(key, i.value("observed", "")),
                                               firmware_value_text(key, i.value("desired", ""))));
                if (i.value("required", false))
                    f.firmware_blocking.push_back(fmt::format("{} {} is required (host.require) but needs-reboot: {}",
                                                              label, setting, i.value("detail", "")));
            }
        }
        if (!unsupported.empty())
            f.warnings.push_back(fmt::format("{}: unsupported, left as is: {}", label, fmt::join(unsupported, "; ")));
        if (!firmware.empty()) {
            f.firmware.push_back(fmt::format("{} {}", n.value("nic", ""), fmt::join(firmware, ", ")));
            f.firmware_plans.push_back(firmware_plan);
        }
    }
    return f;
}

json host_drift_entries(const std::string& node, const json& host_nics) {
    json out = json::array();
    if (!host_nics.is_object() || !host_nics.value("managed", false)) return out;
    for (const auto& n : host_nics.value("nics", json::array()))
        for (const auto& i : n.value("items", json::array())) {
            if (!is_work(i.value("outcome", "")) && i.value("outcome", "") != "needs-reboot") continue;
            out.push_back({{"node", node},
                           {"nic", n.value("nic", "")},
                           {"ifname", n.value("ifname", "")},
                           {"setting", i.value("setting", "")},
                           {"running", i.value("observed", "")},
                           {"desired", i.value("desired", "")},
                           {"outcome", i.value("outcome", "")},
                           {"detail", i.value("detail", "")},
                           {"text", nic_label(n.value("nic", ""), n.value("ifname", "")) + " " + item_text(i)}});
        }
    return out;
}

}  // namespace kiln::network::host
