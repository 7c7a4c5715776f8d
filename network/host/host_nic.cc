#include "network/host/host_nic.h"

#include "network/host/text.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "network/host/nic_firmware.h"
#include "provisioner/core/json_limits.h"

namespace kiln::network::host {

namespace {

using nlohmann::json;

bool unsupported_text(const std::string& s) {
    return s.find("not supported") != std::string::npos || s.find("Not supported") != std::string::npos ||
           s.find("No such file") != std::string::npos;
}

// The tool is not on the host: the runner could not start it, or the remote shell said so.
bool tool_missing(const Result<CommandResult>& r) {
    if (!r) return true;
    return r->exit_code == 127 || r->err.find("exec of") != std::string::npos ||
           r->err.find("command not found") != std::string::npos;
}

// dcb's JSON for dscp-prio: entries as [dscp, prio] or {"dscp": d, "prio": p}.
std::map<int, int> parse_dscp_prio(const json& doc) {
    std::map<int, int> out;
    auto it = doc.find("dscp_prio");
    if (it == doc.end() || !it->is_array()) return out;
    for (const auto& e : *it) {
        if (e.is_array() && e.size() == 2 && e[0].is_number_integer() && e[1].is_number_integer())
            out[e[0].get<int>()] = e[1].get<int>();
        else if (e.is_object() && e.contains("dscp") && e.contains("prio") && e["dscp"].is_number_integer() &&
                 e["prio"].is_number_integer())
            out[e["dscp"].get<int>()] = e["prio"].get<int>();
    }
    return out;
}

// dcb's JSON for prio-pfc: {"prio_pfc": {"0": false, ...}} or an array of booleans.
std::optional<std::vector<int>> parse_pfc(const json& doc) {
    auto it = doc.find("prio_pfc");
    if (it == doc.end()) return std::nullopt;
    std::vector<int> on;
    if (it->is_object()) {
        for (auto p = it->begin(); p != it->end(); ++p)
            if (p->is_boolean() && p->get<bool>()) on.push_back(std::stoi(p.key()));
    } else if (it->is_array()) {
        for (size_t i = 0; i < it->size(); ++i)
            if ((*it)[i].is_boolean() && (*it)[i].get<bool>()) on.push_back(static_cast<int>(i));
    } else {
        return std::nullopt;
    }
    std::sort(on.begin(), on.end());
    return on;
}

std::string list_str(const std::vector<int>& v) {
    return v.empty() ? "none" : fmt::format("{}", fmt::join(v, ","));
}

}  // namespace

std::string to_string(NicOutcome o) {
    switch (o) {
        case NicOutcome::Ok:
            return "ok";
        case NicOutcome::Changed:
            return "changed";
        case NicOutcome::Unsupported:
            return "unsupported";
        case NicOutcome::NeedsReboot:
            return "needs-reboot";
        case NicOutcome::Drift:
            return "drift";
        case NicOutcome::Failed:
            return "failed";
    }
    return "?";
}

std::string NicItem::str() const {
    std::string s =
        fmt::format("{}: {} -> {} ({})", setting, observed.empty() ? "?" : observed, desired, to_string(outcome));
    return detail.empty() ? s : s + ": " + detail;
}

bool NicReport::converged() const {
    return std::all_of(items.begin(), items.end(), [](const NicItem& i) {
        return i.outcome == NicOutcome::Ok || i.outcome == NicOutcome::Changed;
    });
}

const NicItem* NicReport::find(const std::string& setting) const {
    for (const auto& i : items)
        if (i.setting == setting) return &i;
    return nullptr;
}

NicDesired nic_desired_from_profile(const network::RoceProfile& p, const std::string& ifname) {
    NicDesired d;
    d.ifname = ifname;
    d.mtu = p.host_mtu;
    d.roce_dscp = p.roce_dscp;
    d.cnp_dscp = p.cnp_dscp;
    d.roce_priority = p.lossless_priority;
    d.cnp_priority = p.cnp_priority;
    d.pfc_priority = p.lossless_priority;
    d.ecn_priorities = {p.lossless_priority};
    return d;
}

HostNicApplier::HostNicApplier(std::shared_ptr<CommandRunner> runner, HostNicOptions options)
    : runner_(std::move(runner)), options_(std::move(options)) {}

Result<CommandResult> HostNicApplier::exec(std::vector<std::string> argv, std::string stdin_data) {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.stdin_data = std::move(stdin_data);
    spec.timeout = options_.timeout;
    spec.max_output = 1u << 20;
    return runner_->run(spec);
}

std::optional<std::string> HostNicApplier::read_sysfs(const std::string& path) {
    auto r = exec({"cat", path});
    if (!r || !r->success()) return std::nullopt;
    return trim(r->out);
}

Result<NicReport> HostNicApplier::observe(const NicDesired& want) {
    return run(want, false);
}
Result<NicReport> HostNicApplier::apply(const NicDesired& want) {
    return run(want, true);
}

Result<NicReport> HostNicApplier::run(const NicDesired& want, bool change) {
    if (want.ifname.empty() || want.ifname.find('/') != std::string::npos || want.ifname[0] == '-' ||
        want.ifname.size() > 15)
        return make_error("network", "network.bad_nic", fmt::format("'{}' is not an interface name", want.ifname));
    auto link = exec({"ip", "-j", "-d", "link", "show", "dev", want.ifname});
    if (!link) return make_error("network", "network.host_tool_missing", "ip (iproute2): " + link.error().message);
    if (!link->success())
        return make_error("network", "network.no_such_nic",
                          fmt::format("interface {}: {}", want.ifname, first_line(link->err)), link->timed_out);
    NicReport r;
    r.ifname = want.ifname;
    mtu(want, change, r);
    sriov(want, change, r);
    dscp_trust(want, change, r);
    pfc(want, change, r);
    ecn(want, change, r);
    firmware(want, r);
    return r;
}

void HostNicApplier::mtu(const NicDesired& w, bool change, NicReport& r) {
    if (!w.mtu) return;
    NicItem item{"mtu", std::to_string(*w.mtu)};
    auto read = [&]() -> std::optional<json> {
        auto l = exec({"ip", "-j", "-d", "link", "show", "dev", w.ifname});
        if (!l || !l->success()) return std::nullopt;
        auto doc = parse_json_limited(l->out, "ip -j -d link show", {}, "network");
        if (!doc || !doc->is_array() || doc->empty() || !(*doc)[0].is_object()) return std::nullopt;
        return (*doc)[0];
    };
    auto before = read();
    if (!before || !before->contains("mtu")) {
        item.outcome = NicOutcome::Failed;
        item.detail = "cannot read the link with ip -j link";
        r.items.push_back(item);
        return;
    }
    const int cur = (*before)["mtu"].get<int>();
    item.observed = std::to_string(cur);
    if (cur == *w.mtu) {
        r.items.push_back(item);
        return;
    }
    if (before->contains("max_mtu") && (*before)["max_mtu"].get<int>() < *w.mtu) {
        item.outcome = NicOutcome::Unsupported;
        item.detail = fmt::format("the NIC's largest MTU is {}", (*before)["max_mtu"].get<int>());
        r.items.push_back(item);
        return;
    }
    if (!change) {
        item.outcome = NicOutcome::Drift;
        r.items.push_back(item);
        return;
    }
    auto set = exec({"ip", "link", "set", "dev", w.ifname, "mtu", std::to_string(*w.mtu)});
    auto after = read();
    if (!set || !set->success() || !after || (*after)["mtu"].get<int>() != *w.mtu) {
        item.outcome = NicOutcome::Failed;
        item.detail = set && !set->success() ? first_line(set->err) : "did not read back";
    } else {
        item.outcome = NicOutcome::Changed;
    }
    r.items.push_back(item);
}

void HostNicApplier::sriov(const NicDesired& w, bool change, NicReport& r) {
    if (!w.sriov_vfs) return;
    NicItem item{"sriov_numvfs", std::to_string(*w.sriov_vfs)};
    const std::string dev = fmt::format("{}/class/net/{}/device/", options_.sysfs, w.ifname);
    auto total = read_sysfs(dev + "sriov_totalvfs");
    auto cur = read_sysfs(dev + "sriov_numvfs");
    if (!total || !cur) {
        item.outcome = NicOutcome::Unsupported;
        item.detail = "no SR-IOV on this interface (no device/sriov_totalvfs)";
        r.items.push_back(item);
        return;
    }
    item.observed = *cur;
    if (*cur == item.desired) {
        r.items.push_back(item);
        return;
    }
    if (std::atoi(total->c_str()) < *w.sriov_vfs) {
        item.outcome = NicOutcome::Failed;
        item.detail = fmt::format("the NIC offers at most {} VFs (firmware NUM_OF_VFS)", *total);
        r.items.push_back(item);
        return;
    }
    if (!change) {
        item.outcome = NicOutcome::Drift;
        r.items.push_back(item);
        return;
    }
    // The kernel refuses a change between two non-zero counts: go through 0.
    bool ok = true;
    if (*cur != "0" && *w.sriov_vfs != 0) {
        auto z = exec({"tee", dev + "sriov_numvfs"}, "0\n");
        ok = z && z->success();
    }
    auto s = ok ? exec({"tee", dev + "sriov_numvfs"}, std::to_string(*w.sriov_vfs) + "\n")
                : Result<CommandResult>(CommandResult{});
    ok = ok && s && s->success() && read_sysfs(dev + "sriov_numvfs") == item.desired;
    item.outcome = ok ? NicOutcome::Changed : NicOutcome::Failed;
    if (!ok) item.detail = s && !s->err.empty() ? first_line(s->err) : "did not read back";
    r.items.push_back(item);
}

void HostNicApplier::dscp_trust(const NicDesired& w, bool change, NicReport& r) {
    if (!w.roce_dscp) return;
    std::map<int, int> want{{*w.roce_dscp, w.roce_priority}};
    if (w.cnp_dscp) want[*w.cnp_dscp] = w.cnp_priority;
    std::vector<std::string> pairs;
    for (auto [d, p] : want) pairs.push_back(fmt::format("{}:{}", d, p));
    NicItem item{"dscp_trust", fmt::format("{}", fmt::join(pairs, " "))};

    auto read = [&]() -> Result<std::map<int, int>> {
        auto q = exec({"dcb", "-j", "app", "show", "dev", w.ifname, "dscp-prio"});
        if (tool_missing(q)) return make_error("network", "network.unsupported", "dcb (iproute2) is not installed");
        if (!q->success())
            return make_error("network", unsupported_text(q->err) ? "network.unsupported" : "network.failed",
                              "dcb app: " + first_line(q->err));
        auto doc = parse_json_limited(q->out.empty() ? "{}" : q->out, "dcb -j app show", {}, "network");
        if (!doc) return make_error("network", "network.failed", doc.error().message);
        return parse_dscp_prio(*doc);
    };
    auto describe = [](const std::map<int, int>& m) {
        std::vector<std::string> v;
        for (auto [d, p] : m) v.push_back(fmt::format("{}:{}", d, p));
        return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, " "));
    };
    auto cur = read();
    if (!cur) {
        item.outcome = cur.error().code == "network.unsupported" ? NicOutcome::Unsupported : NicOutcome::Failed;
        item.detail =
            cur.error().code == "network.unsupported" && cur.error().message.find("installed") == std::string::npos
                ? "the NIC has no DCB (" + cur.error().message + ")"
                : cur.error().message;
        r.items.push_back(item);
        return;
    }
    auto holds = [&](const std::map<int, int>& m) {
        return std::all_of(want.begin(), want.end(),
                           [&](auto e) { return m.count(e.first) && m.at(e.first) == e.second; });
    };
    item.observed = describe(*cur);
    if (holds(*cur)) {
        r.items.push_back(item);
        return;
    }
    if (!change) {
        item.outcome = NicOutcome::Drift;
        r.items.push_back(item);
        return;
    }
    std::vector<std::string> argv = {"dcb", "app", "replace", "dev", w.ifname, "dscp-prio"};
    argv.insert(argv.end(), pairs.begin(), pairs.end());
    auto s = exec(argv);
    auto after = read();
    const bool ok = s && s->success() && after && holds(*after);
    item.outcome = ok ? NicOutcome::Changed : NicOutcome::Failed;
    if (!ok) item.detail = s && !s->success() ? first_line(s->err) : "did not read back";
    r.items.push_back(item);
}

void HostNicApplier::pfc(const NicDesired& w, bool change, NicReport& r) {
    if (!w.pfc_priority) return;
    const std::vector<int> want{*w.pfc_priority};
    NicItem item{"pfc", list_str(want)};
    auto read = [&]() -> Result<std::vector<int>> {
        auto q = exec({"dcb", "-j", "pfc", "show", "dev", w.ifname, "prio-pfc"});
        if (tool_missing(q)) return make_error("network", "network.unsupported", "dcb (iproute2) is not installed");
        if (!q->success())
            return make_error("network", unsupported_text(q->err) ? "network.unsupported" : "network.failed",
                              "dcb pfc: " + first_line(q->err));
        auto doc = parse_json_limited(q->out, "dcb -j pfc show", {}, "network");
        auto v = doc ? parse_pfc(*doc) : std::nullopt;
        if (!v) return make_error("network", "network.failed", "dcb pfc printed no prio_pfc");
        return *v;
    };
    auto cur = read();
    if (!cur) {
        item.outcome = cur.error().code == "network.unsupported" ? NicOutcome::Unsupported : NicOutcome::Failed;
        item.detail =
            cur.error().code == "network.unsupported" && cur.error().message.find("installed") == std::string::npos
                ? "the NIC has no DCB (" + cur.error().message + ")"
                : cur.error().message;
        r.items.push_back(item);
        return;
    }
    item.observed = list_str(*cur);
    if (*cur == want) {
        r.items.push_back(item);
        return;
    }
    if (!change) {
        item.outcome = NicOutcome::Drift;
        r.items.push_back(item);
        return;
    }
    std::vector<std::string> argv = {"dcb", "pfc", "set", "dev", w.ifname, "prio-pfc"};
    for (int p = 0; p < 8; ++p) argv.push_back(fmt::format("{}:{}", p, p == *w.pfc_priority ? "on" : "off"));
    auto s = exec(argv);
    auto after = read();
    const bool ok = s && s->success() && after && *after == want;
    item.outcome = ok ? NicOutcome::Changed : NicOutcome::Failed;
    if (!ok) item.detail = s && !s->success() ? first_line(s->err) : "did not read back";
    r.items.push_back(item);
}

void HostNicApplier::ecn(const NicDesired& w, bool change, NicReport& r) {
    // mlx5: /sys/class/net/<if>/ecn/roce_{np,rp}/enable/<prio> (NP marks CNPs, RP reacts to them).
    for (const char* side : {"roce_np", "roce_rp"}) {
        for (int prio : w.ecn_priorities) {
            NicItem item{fmt::format("ecn {} prio {}", side, prio), "1"};
            const std::string path =
                fmt::format("{}/class/net/{}/ecn/{}/enable/{}", options_.sysfs, w.ifname, side, prio);
            auto cur = read_sysfs(path);
            if (!cur) {
                item.outcome = NicOutcome::Unsupported;
                item.detail = fmt::format("no RoCE ECN control in sysfs (ecn/{}/enable)", side);
                r.items.push_back(item);
                continue;
            }
            item.observed = *cur;
            if (*cur != "1") {
                if (!change) {
                    item.outcome = NicOutcome::Drift;
                } else {
                    auto s = exec({"tee", path}, "1\n");
                    const bool ok = s && s->success() && read_sysfs(path) == "1";
                    item.outcome = ok ? NicOutcome::Changed : NicOutcome::Failed;
                    if (!ok) item.detail = "did not read back";
                }
            }
            r.items.push_back(item);
        }
    }
}

void HostNicApplier::firmware(const NicDesired& w, NicReport& r) {
    if (!w.firmware) return;
    auto pci = nic_pci_address(*runner_, options_.sysfs, w.ifname, options_.timeout);
    const auto settings =
        firmware_settings(*w.firmware, pci ? nic_port(*runner_, options_.sysfs, w.ifname, *pci, options_.timeout) : 1);
    auto unsupported = [&](const std::string& why) {
        for (const auto& s : settings)
            r.items.push_back({"firmware " + s.key, s.wanted, "", NicOutcome::Unsupported, why});
    };
    if (!pci) {
        unsupported("not a PCI device");
        return;
    }
    auto q = query_nic_firmware(*runner_, *pci, settings, options_.timeout);
    if (!q) {
        unsupported(q.error().message);
        return;
    }
    // Differences are set with mlxconfig and take effect at the next boot:
    // the network stage's firmware action sets them and reboots the host once.
    std::vector<std::string> sets;
    std::vector<NicItem> items;
    bool pending = false;
    for (const auto& s : settings) {
        NicItem item{"firmware " + s.key, s.wanted};
        auto v = q->find(s.key);
        if (v == q->end()) {
            item.outcome = NicOutcome::Unsupported;
            item.detail = "the firmware has no " + s.key;
            items.push_back(item);
            continue;
        }
        item.observed = v->second.running();
        if (v->second.next_boot != s.wanted) sets.push_back(s.key + "=" + s.wanted);
        if (v->second.next_boot != s.wanted || v->second.running() != s.wanted) {
            item.outcome = NicOutcome::NeedsReboot;
            pending = true;
        }
        items.push_back(item);
    }
    const std::string plan =
        !pending       ? ""
        : sets.empty() ? fmt::format("set on {} for the next boot; takes effect when the host reboots", *pci)
                       : fmt::format("mlxconfig -d {} -y set {}, then one host reboot", *pci, fmt::join(sets, " "));
    for (auto& i : items) {
        if (i.outcome == NicOutcome::NeedsReboot) i.detail = plan;
        r.items.push_back(i);
    }
}

}  // namespace kiln::network::host
