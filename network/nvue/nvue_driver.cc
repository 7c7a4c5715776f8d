#include "network/nvue/nvue_driver.h"

#include <thread>

#include <fmt/format.h>

#include "network/config_tree.h"
#include "provisioner/net/url.h"

namespace kiln::network::nvue {

namespace {

using nlohmann::json;

const char* const kProfile = "default-global";

// RoCE lossless mode's own settings (NVIDIA, Cumulus Linux user guide, "RDMA
// over Converged Ethernet - RoCE", `nv show qos roce`): trust pcp,dscp (NVUE
// `trust both`), ECN min 146.48 KB = 150000 B, max 1.43 MB = 1500000 B,
// probability 100; DSCP d maps to switch priority d / 8.
const char* const kRoceTrust = "both";
constexpr int kRoceEcnMinBytes = 150000;
constexpr int kRoceEcnMaxBytes = 1500000;
constexpr int kRoceEcnProbability = 100;
constexpr int kDscpPerPriority = 8;

// NVUE's watchdog ranges (NVIDIA, NVUE command reference, Cumulus Linux 5.6+).
constexpr int kMinPollMs = 100;
constexpr int kMaxPollMs = 5000;
constexpr int kMaxRobustness = 1000;

TreeDiffOptions tree_options() {
    TreeDiffOptions o;
    o.ports_key = "interface";
    o.whole_keys = {"switch-priority"};
    return o;
}

// The managed part of a tree: the keys render() writes, for these ports.
json project(const json& tree, const std::vector<Port>& ports) {
    json out = json::object();
    const json qos = tree.value("qos", json::object());
    json q = json::object();
    if (qos.contains("roce")) q["roce"] = qos["roce"];
    for (const char* k : {"mapping", "pfc", "congestion-control"})
        if (qos.contains(k) && qos[k].contains(kProfile)) q[k][kProfile] = qos[k][kProfile];
    if (qos.contains("pfc-watchdog")) q["pfc-watchdog"] = qos["pfc-watchdog"];
    out["qos"] = q;
    json ifs = json::object();
    const json all = tree.value("interface", json::object());
    for (const auto& p : ports) {
        json i = json::object();
        if (all.contains(p.name)) {
            const json& src = all[p.name];
            if (src.contains("link") && src["link"].contains("mtu")) i["link"]["mtu"] = src["link"]["mtu"];
            if (src.contains("qos"))
                for (const char* k : {"pfc", "pfc-watchdog"})
                    if (src["qos"].contains(k)) i["qos"][k] = src["qos"][k];
        }
        ifs[p.name] = i;
    }
    out["interface"] = ifs;
    return out;
}

Error profile_error(const network::RoceProfile& p, const std::string& what) {
    return make_error("network", "network.bad_profile",
                      p.name.empty() ? what : fmt::format("network profile {}: {}", p.name, what));
}

}  // namespace

Result<NvueWatchdogTiming> nvue_watchdog_timing(int detection_ms) {
    if (detection_ms < kMinPollMs)
        return make_error("network", "network.bad_profile",
                          fmt::format("NVUE's PFC watchdog polls every {}..{} ms and acts after whole polls: "
                                      "detection_ms {} is shorter than one poll",
                                      kMinPollMs, kMaxPollMs, detection_ms));
    for (int poll = kMinPollMs; poll <= kMaxPollMs && poll <= detection_ms; ++poll)
        if (detection_ms % poll == 0 && detection_ms / poll <= kMaxRobustness)
            return NvueWatchdogTiming{poll, detection_ms / poll};
    return make_error("network", "network.bad_profile",
                      fmt::format("NVUE's PFC watchdog detects after polling-interval ({}..{} ms) x robustness "
                                  "(1..{}) and no such product is {} ms: pick a detection_ms with a factor in {}..{}",
                                  kMinPollMs, kMaxPollMs, kMaxRobustness, detection_ms, kMinPollMs, kMaxPollMs));
}

Result<json> render_nvue(const network::RoceProfile& profile, const std::vector<Port>& ports) {
    auto timing = nvue_watchdog_timing(profile.pfc_watchdog_detection_ms);
    if (!timing) return profile_error(profile, timing.error().message);
    // NVUE's watchdog stops honouring pause frames and drops the queue's new
    // packets (user guide, "PFC Watchdog"); it has no forward or alert mode.
    if (profile.pfc_watchdog_action != "drop")
        return profile_error(profile, fmt::format("pfc_watchdog.action '{}' cannot be expressed on NVUE, whose PFC "
                                                  "watchdog always drops; use \"drop\" for fabrics with NVUE switches",
                                                  profile.pfc_watchdog_action));
    json q;
    q["roce"] = {{"enable", "on"}, {"mode", "lossless"}};

    // RoCE mode maps DSCP d to priority d / 8: besides roce_dscp, the other
    // DSCPs of the lossless priority's block would be paused by PFC too, so
    // they go to the lowest priority that is neither lossless nor CNP.
    int lossy = 0;
    while (lossy == profile.lossless_priority || lossy == profile.cnp_priority) ++lossy;
    json dscp = json::object();
    for (int d = 0; d < 64; ++d) {
        if (d == profile.roce_dscp)
            dscp[std::to_string(d)] = {{"switch-priority", profile.lossless_priority}};
        else if (d == profile.cnp_dscp)
            dscp[std::to_string(d)] = {{"switch-priority", profile.cnp_priority}};
        else if (d / kDscpPerPriority == profile.lossless_priority)
            dscp[std::to_string(d)] = {{"switch-priority", lossy}};
    }
    q["mapping"][kProfile] = {{"trust", kRoceTrust}, {"dscp", dscp}};

    json prios = json::object();
    for (int p : profile.pfc_priorities) prios[std::to_string(p)] = json::object();
    q["pfc"][kProfile] = {{"switch-priority", prios}};

    // RoCE mode's ECN unless the profile writes its own (kiln's defaults are
    // for the other switch OSes, which have no RoCE mode to defer to).
    const long long ecn_min = profile.is_given("ecn_min_kb") ? profile.ecn_min_kb * 1024LL : kRoceEcnMinBytes;
    const long long ecn_max = profile.is_given("ecn_max_kb") ? profile.ecn_max_kb * 1024LL : kRoceEcnMaxBytes;
    if (ecn_min >= ecn_max)
        return profile_error(profile, fmt::format("ECN min threshold {} B is not below the max {} B (RoCE mode's own "
                                                  "unless written): write both ecn_min_kb and ecn_max_kb",
                                                  ecn_min, ecn_max));
    q["congestion-control"][kProfile]["traffic-class"][std::to_string(profile.lossless_priority)] = {
        {"ecn", "enable"},
        {"min-threshold", ecn_min},
        {"max-threshold", ecn_max},
        {"probability", profile.is_given("ecn_probability_pct") ? profile.ecn_probability_pct : kRoceEcnProbability}};

    // No restoration setting exists: NVUE restores a queue after a polling
    // interval with no pause frames, so restoration_ms has no NVUE form.
    q["pfc-watchdog"] = {{"polling-interval", timing->polling_interval_ms}, {"robustness", timing->robustness}};
    json ifs = json::object();
    for (const auto& p : ports)
        ifs[p.name] = {{"link", {{"mtu", profile.switch_mtu}}},
                       {"qos", {{"pfc", {{"profile", kProfile}}}, {"pfc-watchdog", {{"state", "enable"}}}}}};
    return json{{"qos", q}, {"interface", ifs}};
}

NvueDriver::NvueDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint, NvueOptions options)
    : http_(std::move(http)), ep_(std::move(endpoint)), options_(options) {}

Result<json> NvueDriver::render(const network::RoceProfile& profile, const std::vector<Port>& ports) const {
    return render_nvue(profile, ports);
}

Result<json> NvueDriver::call(const std::string& method, const std::string& target, const json* body) {
    auto req = ep_.request(method, target);
    if (body) {
        req.body = body->dump();
        req.headers.push_back({"Content-Type", "application/json"});
    }
    return json_body(ep_, req, http_->send(req));
}

Result<json> NvueDriver::read_state() {
    auto tree = call("GET", "/nvue_v1/?rev=applied", nullptr);
    if (!tree) return tree.error();
    if (!tree->is_object())
        return make_error("network", "network.switch_http",
                          fmt::format("switch {}: the applied config is not an object", ep_.name));
    return tree;
}

json NvueDriver::project_running(const json& state, const std::vector<Port>& ports) const {
    return project(state, ports);
}

std::vector<ConfigChange> NvueDriver::diff(const json& desired, const json& running) const {
    return diff_trees(desired, running, tree_options());
}

Status NvueDriver::apply(const json& desired, const json& running) {
    auto created = call("POST", "/nvue_v1/revision", nullptr);
    if (!created) return created.error();
    // {"<id>": {"state": "pending", ...}}: the one key is the revision id.
    if (!created->is_object() || created->size() != 1)
        return make_error("network", "network.nvue_revision",
                          fmt::format("switch {}: creating a revision did not return one revision id", ep_.name));
    const std::string id = created->begin().key();
    const std::string rev = net::percent_encode(id);

    const json patch = merge_patch(desired, running, tree_options());
    for (const auto& [top, sub] : patch.items()) {
        auto r = call("PATCH", fmt::format("/nvue_v1/{}?rev={}", top, rev), &sub);
        if (!r)
            return make_error("network", r.error().code,
                              r.error().message + " (revision not applied; the switch keeps its config)");
    }
    const json apply_body = {{"state", "apply"}, {"auto-prompt", {{"ays", "ays_yes"}}}};
    if (auto r = call("PATCH", "/nvue_v1/revision/" + rev, &apply_body); !r)
        return make_error("network", r.error().code,
                          r.error().message + " (revision not applied; the switch keeps its config)");

    std::string state;
    for (int i = 0; i < options_.poll_limit; ++i) {
        auto st = call("GET", "/nvue_v1/revision/" + rev, nullptr);
        if (!st) return st.error();
        state = st->value("state", "");
        if (state == "applied") return ok_status();
        if (state == "apply_fail" || state == "ays_fail" || state == "invalid" || state == "apply_error") {
            std::string issue;
            if (st->contains("transition") && (*st)["transition"].contains("issue"))
                issue = ": " + (*st)["transition"]["issue"].dump();
            return make_error("network", "network.nvue_apply_failed",
                              fmt::format("switch {}: revision {} ended in state {}{}; the switch stays at its "
                                          "previous revision",
                                          ep_.name, id, state, issue));
        }
        std::this_thread::sleep_for(options_.poll_interval);
    }
    return make_error(
        "network", "network.nvue_apply_stuck",
        fmt::format("switch {}: revision {} still '{}' after {} polls", ep_.name, id, state, options_.poll_limit),
        true);
}

}  // namespace kiln::network::nvue
