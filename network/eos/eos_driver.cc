#include "network/eos/eos_driver.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "network/config_tree.h"

namespace kiln::network::eos {

namespace {

using nlohmann::json;

TreeDiffOptions tree_options() {
    TreeDiffOptions o;
    o.ports_key = "interfaces";
    return o;
}

std::string seconds(int ms) {
    // EOS takes decimal seconds: 200 ms -> "0.2".
    std::string s = fmt::format("{:.3f}", ms / 1000.0);
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s;
}

// EOS takes the watchdog's timeout and recovery-time as seconds with at
// most two decimals, 0.01..60 (Arista AVD schema, priority_flow_control.watchdog).
constexpr int kWatchdogStepMs = 10;
constexpr int kWatchdogMaxMs = 60000;

Status check_watchdog_ms(const network::RoceProfile& p, const char* key, int ms) {
    if (ms >= kWatchdogStepMs && ms <= kWatchdogMaxMs && ms % kWatchdogStepMs == 0) return ok_status();
    const std::string what = fmt::format(
        "EOS takes the PFC watchdog's times in steps of {} ms from {} ms to {} s: pfc_watchdog.{} {} "
        "cannot be expressed",
        kWatchdogStepMs, kWatchdogStepMs, kWatchdogMaxMs / 1000, key, ms);
    return make_error("network", "network.bad_profile",
                      p.name.empty() ? what : fmt::format("network profile {}: {}", p.name, what));
}

// EOS's default DSCP-to-traffic-class map: DSCP d to TC d / 8, except
// 0-7 (best effort) to TC 1 and 8-15 to TC 0, as its CoS default maps CoS 0
// to TC 1 and CoS 1 to TC 0 (Arista's QoS chapter, "default DSCP to TC";
// our reading of it, not a captured switch).
int eos_default_tc(int dscp) {
    if (dscp < 8) return 1;
    if (dscp < 16) return 0;
    return dscp / 8;
}

std::string watchdog_action(const std::string& action) {
    return action == "drop" ? "drop" : "notify-only";
}

// The child commands of a mode line in `show running-config` JSON.
const json* children(const json& node) {
    if (node.is_object() && node.contains("cmds") && node["cmds"].is_object()) return &node["cmds"];
    return nullptr;
}

// j[key] when j is an object holding it; an empty object otherwise.
const json& member(const json& j, const std::string& key) {
    static const json empty = json::object();
    if (!j.is_object()) return empty;
    auto it = j.find(key);
    return it == j.end() ? empty : *it;
}

std::string ecn_line(const json& e) {
    return fmt::format(
        "random-detect ecn minimum-threshold {} kbytes maximum-threshold {} kbytes max-mark-probability {}",
        e.value("min-kbytes", 0), e.value("max-kbytes", 0), e.value("probability", 0));
}

}  // namespace

// The families are Broadcom Sand (Arad, Jericho, Jericho2) VOQ switches (Arista
// 7280R3 architecture white paper: "deep buffer, virtual output queue (VoQ)");
// that they take uc-tx-queue where others take tx-queue is issue 16's finding,
// and Arista's AVD generates both forms in interface mode.
bool eos_model_is_voq(const std::string& model_name) {
    // "DCS-7280CR3-32P4-F" -> "7280CR3-32P4-F"; the family is the first four digits.
    std::string m = model_name;
    if (m.rfind("DCS-", 0) == 0) m = m.substr(4);
    if (m.size() < 4 || !std::all_of(m.begin(), m.begin() + 4, [](char c) { return c >= '0' && c <= '9'; }))
        return false;
    const std::string family = m.substr(0, 4);
    if (family == "7280") return true;                             // 7280E/R/R2/R3
    if (family.rfind("75", 0) == 0 || family.rfind("78", 0) == 0)  // 7500E/R/R3 and 7800R3 chassis
        return true;
    if (family == "7020") {  // 7020R (Jericho): 7020SR, 7020TR, 7020TRA
        const auto dash = m.find('-');
        const std::string series = m.substr(4, dash == std::string::npos ? std::string::npos : dash - 4);
        return series.find('R') != std::string::npos;
    }
    return false;
}

Result<EosPlatform> eos_platform(const json& show_version) {
    const json& model = member(show_version, "modelName");
    if (!model.is_string() || model.get<std::string>().empty())
        return make_error("network", "network.eos_platform_unknown",
                          "show version gave no modelName: kiln cannot tell whether the switch takes tx-queue or "
                          "uc-tx-queue");
    EosPlatform p;
    p.model = model.get<std::string>();
    p.voq = eos_model_is_voq(p.model);
    return p;
}

Result<json> render_eos(const network::RoceProfile& profile, const std::vector<Port>& ports) {
    if (auto s = check_watchdog_ms(profile, "detection_ms", profile.pfc_watchdog_detection_ms); !s) return s.error();
    if (auto s = check_watchdog_ms(profile, "restoration_ms", profile.pfc_watchdog_restoration_ms); !s)
        return s.error();
    json out;
    // By default EOS puts every DSCP of the lossless TC's block (24-31 for TC
    // 3) in that TC, so traffic that is not RoCE would be paused by PFC as
    // well: those DSCPs go where best effort goes (DSCP 0's TC), or to the
    // lowest TC that is neither lossless nor CNP.
    int lossy = eos_default_tc(0);
    if (lossy == profile.lossless_priority || lossy == profile.cnp_priority) {
        lossy = 0;
        while (lossy == profile.lossless_priority || lossy == profile.cnp_priority) ++lossy;
    }
    json dscp = json::object();
    for (int d = 0; d < 64; ++d) {
        if (d == profile.roce_dscp)
            dscp[std::to_string(d)] = profile.lossless_priority;
        else if (d == profile.cnp_dscp)
            dscp[std::to_string(d)] = profile.cnp_priority;
        else if (eos_default_tc(d) == profile.lossless_priority)
            dscp[std::to_string(d)] = lossy;
    }
    out["qos"]["dscp-map"] = std::move(dscp);
    // Poll at half the shorter of timeout and recovery-time: above that EOS
    // substitutes an interval of its own (a RoCE deployment guide for EOS;
    // AVD takes the poll with three decimals).
    const int poll_ms = std::min(profile.pfc_watchdog_detection_ms, profile.pfc_watchdog_restoration_ms) / 2;
    out["pfc-watchdog"] = {{"timeout", seconds(profile.pfc_watchdog_detection_ms)},
                           {"recovery-time", seconds(profile.pfc_watchdog_restoration_ms)},
                           {"polling-interval", seconds(poll_ms)},
                           {"action", watchdog_action(profile.pfc_watchdog_action)}};
    json ifs = json::object();
    for (const auto& p : ports) {
        json i;
        i["mtu"] = std::min(profile.switch_mtu, kMaxMtu);
        i["qos-trust"] = "dscp";
        i["pfc"] = "on";
        i["pfc-no-drop"] = profile.pfc_priorities;
        i["pfc-watchdog"] = "on";
        i["queue"][std::to_string(profile.lossless_priority)]["ecn"] = {{"min-kbytes", profile.ecn_min_kb},
                                                                        {"max-kbytes", profile.ecn_max_kb},
                                                                        {"probability", profile.ecn_probability_pct}};
        ifs[p.name] = i;
    }
    out["interfaces"] = ifs;
    return out;
}

json parse_running_config(const json& show, const std::vector<Port>& ports) {
    // EOS takes and shows a list of DSCPs per traffic class ("qos map dscp 24 25 27 to traffic-class 1").
    static const std::regex dscp_re(R"(^qos map dscp ((?:\d+ )*\d+) to traffic-class (\d+)$)");
    static const std::regex wd_re(
        R"(^priority-flow-control pause watchdog default (timeout|recovery-time|polling-interval) (\S+)$)");
    static const std::regex wd_action_re(R"(^priority-flow-control pause watchdog action (\S+)$)");
    static const std::regex mtu_re(R"(^mtu (\d+)$)");
    static const std::regex trust_re(R"(^qos trust (\S+)$)");
    static const std::regex pfc_re(R"(^priority-flow-control (on|off)$)");
    static const std::regex nodrop_re(R"(^priority-flow-control priority (\d) no-drop$)");
    static const std::regex txq_re(R"(^(?:uc-)?tx-queue (\d+)$)");  // either platform's form
    static const std::regex ecn_re(
        R"(^random-detect ecn minimum-threshold (\d+) kbytes maximum-threshold (\d+) kbytes max-mark-probability (\d+)$)");

    json out;
    out["qos"]["dscp-map"] = json::object();
    out["pfc-watchdog"] = json::object();
    out["interfaces"] = json::object();
    for (const auto& p : ports) out["interfaces"][p.name] = json::object();
    const json* top = children(show);
    if (!top) return out;
    std::smatch m;
    for (const auto& [line, node] : top->items()) {
        if (std::regex_match(line, m, dscp_re)) {
            const int tc = std::stoi(m[2].str());
            std::istringstream values(m[1].str());
            for (int d; values >> d;) out["qos"]["dscp-map"][std::to_string(d)] = tc;
        } else if (std::regex_match(line, m, wd_re)) {
            out["pfc-watchdog"][m[1].str()] = m[2].str();
        } else if (std::regex_match(line, m, wd_action_re)) {
            out["pfc-watchdog"]["action"] = m[1].str();
        } else if (line.rfind("interface ", 0) == 0) {
            const std::string name = line.substr(10);
            if (!out["interfaces"].contains(name)) continue;
            json& i = out["interfaces"][name];
            const json* sub = children(node);
            if (!sub) continue;
            for (const auto& [l, n] : sub->items()) {
                if (std::regex_match(l, m, mtu_re)) {
                    i["mtu"] = std::stoi(m[1].str());
                } else if (std::regex_match(l, m, trust_re)) {
                    i["qos-trust"] = m[1].str();
                } else if (std::regex_match(l, m, pfc_re)) {
                    i["pfc"] = m[1].str();
                } else if (l == "priority-flow-control pause watchdog") {
                    i["pfc-watchdog"] = "on";
                } else if (std::regex_match(l, m, nodrop_re)) {
                    if (!i.contains("pfc-no-drop")) i["pfc-no-drop"] = json::array();
                    i["pfc-no-drop"].push_back(std::stoi(m[1].str()));
                } else if (std::regex_match(l, m, txq_re)) {
                    const std::string q = m[1].str();
                    if (const json* qs = children(n))
                        for (const auto& [ql, qn] : qs->items())
                            if (std::regex_match(ql, m, ecn_re))
                                i["queue"][q]["ecn"] = {{"min-kbytes", std::stoi(m[1].str())},
                                                        {"max-kbytes", std::stoi(m[2].str())},
                                                        {"probability", std::stoi(m[3].str())}};
                }
            }
            if (i.contains("pfc-no-drop")) {
                auto v = i["pfc-no-drop"].get<std::vector<int>>();
                std::sort(v.begin(), v.end());
                i["pfc-no-drop"] = v;
            }
        }
    }
    return out;
}

std::vector<std::string> eos_config_lines(const json& desired, const json& running, const EosPlatform& platform) {
    std::vector<std::string> lines;
    const json& dscp_map = member(member(desired, "qos"), "dscp-map");
    for (auto it = dscp_map.begin(); it != dscp_map.end(); ++it)
        lines.push_back(fmt::format("qos map dscp {} to traffic-class {}", it.key(), it.value().get<int>()));
    const json& wd = member(desired, "pfc-watchdog");
    if (wd.contains("timeout"))
        lines.push_back("priority-flow-control pause watchdog default timeout " + wd.at("timeout").get<std::string>());
    if (wd.contains("recovery-time"))
        lines.push_back("priority-flow-control pause watchdog default recovery-time " +
                        wd.at("recovery-time").get<std::string>());
    if (wd.contains("polling-interval"))
        lines.push_back("priority-flow-control pause watchdog default polling-interval " +
                        wd.at("polling-interval").get<std::string>());
    if (wd.contains("action"))
        lines.push_back("priority-flow-control pause watchdog action " + wd.at("action").get<std::string>());
    const json& want_ifs = member(desired, "interfaces");
    const json& have_ifs = member(running, "interfaces");
    for (auto it = want_ifs.begin(); it != want_ifs.end(); ++it) {
        const std::string& port = it.key();
        const json& want = it.value();
        const json& have = member(have_ifs, port);
        lines.push_back("interface " + port);
        if (want.contains("mtu")) lines.push_back(fmt::format("mtu {}", want.at("mtu").get<int>()));
        if (want.contains("qos-trust")) lines.push_back("qos trust " + want.at("qos-trust").get<std::string>());
        if (want.contains("pfc")) lines.push_back("priority-flow-control " + want.at("pfc").get<std::string>());
        if (want.contains("pfc-no-drop")) {
            const auto keep = want.at("pfc-no-drop").get<std::vector<int>>();
            // No-drop on a priority the profile does not name: take it off.
            if (have.contains("pfc-no-drop"))
                for (int p : have.at("pfc-no-drop").get<std::vector<int>>())
                    if (std::find(keep.begin(), keep.end(), p) == keep.end())
                        lines.push_back(fmt::format("no priority-flow-control priority {} no-drop", p));
            for (int p : keep) lines.push_back(fmt::format("priority-flow-control priority {} no-drop", p));
        }
        if (want.contains("pfc-watchdog"))
            lines.push_back(std::string(want.at("pfc-watchdog") == "on" ? "" : "no ") +
                            "priority-flow-control pause watchdog");
        const json& queues = member(want, "queue");
        for (auto q = queues.begin(); q != queues.end(); ++q) {
            lines.push_back(std::string(platform.queue_command()) + " " + q.key());
            if (q.value().contains("ecn")) lines.push_back(ecn_line(q.value().at("ecn")));
            lines.push_back("exit");
        }
        lines.push_back("exit");
    }
    return lines;
}

EosDriver::EosDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint)
    : http_(std::move(http)), ep_(std::move(endpoint)) {}

Result<json> EosDriver::render(const network::RoceProfile& profile, const std::vector<Port>& ports) const {
    return render_eos(profile, ports);
}

Result<json> EosDriver::run_cmds(const std::vector<std::string>& cmds) {
    auto req = ep_.request("POST", "/command-api");
    req.headers.push_back({"Content-Type", "application/json"});
    req.body = json{
        {"jsonrpc", "2.0"},
        {"method", "runCmds"},
        {"params", {{"version", 1}, {"cmds", cmds}, {"format", "json"}}},
        {"id",
         "kiln"}}.dump();
    auto doc = json_body(ep_, req, http_->send(req));
    if (!doc) return doc.error();
    if (doc->contains("error")) {
        const json& e = (*doc)["error"];
        std::string detail = e.value("message", "unknown error");
        // eAPI puts each command's own errors in data[i].errors.
        if (e.contains("data") && e["data"].is_array())
            for (const auto& d : e["data"])
                if (d.is_object() && d.contains("errors"))
                    for (const auto& x : d["errors"])
                        if (x.is_string()) detail += "; " + x.get<std::string>();
        return make_error("network", "network.eapi_error", fmt::format("switch {}: runCmds: {}", ep_.name, detail));
    }
    if (!doc->contains("result") || !(*doc)["result"].is_array())
        return make_error("network", "network.eapi_error",
                          fmt::format("switch {}: runCmds answer has no result", ep_.name));
    return (*doc)["result"];
}

Result<json> EosDriver::read_state() {
    auto r = run_cmds({"enable", "show version", "show running-config"});
    if (!r) return r.error();
    if (r->size() < 3)
        return make_error("network", "network.eapi_error",
                          fmt::format("switch {}: show running-config answered nothing", ep_.name));
    if (auto p = eos_platform((*r)[1])) platform_ = *p;  // apply() asks again when this had none
    return (*r)[2];
}

json EosDriver::project_running(const json& state, const std::vector<Port>& ports) const {
    return parse_running_config(state, ports);
}

Result<EosPlatform> EosDriver::platform() {
    if (platform_) return *platform_;
    auto r = run_cmds({"enable", "show version"});
    if (!r) return r.error();
    auto p = eos_platform(r->size() > 1 ? (*r)[1] : json::object());
    if (!p) return make_error("network", p.error().code, fmt::format("switch {}: {}", ep_.name, p.error().message));
    platform_ = *p;
    return *p;
}

std::vector<ConfigChange> EosDriver::diff(const json& desired, const json& running) const {
    return diff_trees(desired, running, tree_options());
}

Status EosDriver::apply(const json& desired, const json& running) {
    // Session names must be unique on the switch while pending.
    const std::string session = fmt::format(
        "kiln-{}-{}-{}", getpid(),
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count(),
        ++sessions_);
    auto plat = platform();
    if (!plat) {
        Error e = plat.error();
        e.message += " (nothing applied)";
        return e;
    }
    std::vector<std::string> cmds{"enable", "configure session " + session};
    for (auto& l : eos_config_lines(desired, running, *plat)) cmds.push_back(std::move(l));
    cmds.push_back("commit");
    auto r = run_cmds(cmds);
    if (r) return ok_status();
    // The session never committed; drop it so nothing is left pending.
    (void)run_cmds({"enable", "configure session " + session, "abort"});
    Error e = r.error();
    e.message += " (session aborted; the running config is unchanged)";
    return e;
}

}  // namespace kiln::network::eos
