#include "network/nvue/nvue_driver.h"

#include <thread>

#include <fmt/format.h>

#include "network/config_tree.h"
#include "provisioner/net/url.h"

namespace kiln::network::nvue {

namespace {

using nlohmann::json;

const char* const kProfile = "default-global";

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
            if (src.contains("qos") && src["qos"].contains("pfc")) i["qos"]["pfc"] = src["qos"]["pfc"];
        }
        ifs[p.name] = i;
    }
    out["interface"] = ifs;
    return out;
}

}  // namespace

Result<json> render_nvue(const config::RoceProfile& profile, const std::vector<Port>& ports) {
    if (profile.pfc_watchdog_detection_ms <= 0)
        return make_error("network", "bad-profile", "pfc watchdog detection time must be positive");
    json q;
    q["roce"] = {{"enable", "on"}, {"mode", "lossless"}};
    q["mapping"][kProfile] = {{"trust", "l3"},
                              {"dscp",
                               {{std::to_string(profile.roce_dscp), {{"switch-priority", profile.lossless_priority}}},
                                {std::to_string(profile.cnp_dscp), {{"switch-priority", profile.cnp_priority}}}}}};
    json prios = json::object();
    for (int p : profile.pfc_priorities) prios[std::to_string(p)] = json::object();
    q["pfc"][kProfile] = {{"switch-priority", prios}};
    q["congestion-control"][kProfile]["traffic-class"][std::to_string(profile.lossless_priority)] = {
        {"ecn", "enable"},
        {"min-threshold", profile.ecn_min_kb * 1024},
        {"max-threshold", profile.ecn_max_kb * 1024},
        {"probability", profile.ecn_probability_pct}};
    const int robustness = std::max(1, (profile.pfc_watchdog_restoration_ms + profile.pfc_watchdog_detection_ms - 1) /
                                           profile.pfc_watchdog_detection_ms);
    q["pfc-watchdog"] = {{"polling-interval", profile.pfc_watchdog_detection_ms}, {"robustness", robustness}};
    json ifs = json::object();
    for (const auto& p : ports)
        ifs[p.name] = {{"link", {{"mtu", profile.switch_mtu}}}, {"qos", {{"pfc", {{"profile", kProfile}}}}}};
    return json{{"qos", q}, {"interface", ifs}};
}

NvueDriver::NvueDriver(std::shared_ptr<net::HttpClient> http, SwitchEndpoint endpoint, NvueOptions options)
    : http_(std::move(http)), ep_(std::move(endpoint)), options_(options) {}

Result<json> NvueDriver::render(const config::RoceProfile& profile, const std::vector<Port>& ports) const {
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
        return make_error("network", "switch-http",
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
        return make_error("network", "nvue-revision",
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
            return make_error("network", "nvue-apply-failed",
                              fmt::format("switch {}: revision {} ended in state {}{}; the switch stays at its "
                                          "previous revision",
                                          ep_.name, id, state, issue));
        }
        std::this_thread::sleep_for(options_.poll_interval);
    }
    return make_error(
        "network", "nvue-apply-stuck",
        fmt::format("switch {}: revision {} still '{}' after {} polls", ep_.name, id, state, options_.poll_limit),
        true);
}

}  // namespace kiln::network::nvue
