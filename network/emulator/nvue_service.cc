#include "network/emulator/nvue_service.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "provisioner/core/json_pointer.h"

namespace kiln::network::emulator {

namespace {

using nlohmann::json;

SwitchResponse reply(int status, const json& body) {
    return {status, body.dump(), "application/json"};
}

SwitchResponse problem(int status, const std::string& title) {
    return reply(status, {{"status", status}, {"title", title}});
}

// "qos/roce" -> json pointer "/qos/roce"; "" -> the root.
json::json_pointer pointer(const std::string& path) {
    std::string p;
    size_t start = 0;
    while (start < path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string seg = path.substr(start, end - start);
        if (!seg.empty()) {
            p += "/" + json_pointer_escape(seg);
        }
        start = end + 1;
    }
    return json::json_pointer(p);
}

const json* at(const json& j, std::initializer_list<const char*> path) {
    const json* cur = &j;
    for (const char* k : path) {
        if (!cur->is_object()) return nullptr;
        auto it = cur->find(k);
        if (it == cur->end()) return nullptr;
        cur = &*it;
    }
    return cur;
}

bool int_in(const json& v, long long lo, long long hi) {
    return v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi;
}

// What NVUE's schema refuses at PATCH time, for the keys kiln writes (NVIDIA,
// NVUE command reference): "" when the tree is acceptable.
std::string schema_problem(const json& tree) {
    if (const json* wd = at(tree, {"qos", "pfc-watchdog"})) {
        if (const json* v = at(*wd, {"polling-interval"}); v && !int_in(*v, 100, 5000))
            return v->dump() + " is not valid for qos/pfc-watchdog/polling-interval (100-5000)";
        if (const json* v = at(*wd, {"robustness"}); v && !int_in(*v, 1, 1000))
            return v->dump() + " is not valid for qos/pfc-watchdog/robustness (1-1000)";
    }
    if (const json* maps = at(tree, {"qos", "mapping"}); maps && maps->is_object())
        for (const auto& [profile, m] : maps->items()) {
            if (const json* t = at(m, {"trust"});
                t && !(t->is_string() && (*t == "l2" || *t == "l3" || *t == "port" || *t == "both")))
                return t->dump() + " is not valid for qos/mapping/" + profile + "/trust (l2, l3, port, both)";
            if (const json* d = at(m, {"dscp"}); d && d->is_object())
                for (const auto& [code, e] : d->items()) {
                    const json* sp = at(e, {"switch-priority"});
                    if (!std::all_of(code.begin(), code.end(), ::isdigit) || code.empty() || std::stoi(code) > 63 ||
                        (sp && !int_in(*sp, 0, 7)))
                        return "qos/mapping/" + profile + "/dscp/" + code +
                               ": expected DSCP 0-63 to switch-priority 0-7";
                }
        }
    if (const json* ifs = at(tree, {"interface"}); ifs && ifs->is_object())
        for (const auto& [name, i] : ifs->items())
            if (const json* st = at(i, {"qos", "pfc-watchdog", "state"})) {
                if (!(st->is_string() && (*st == "enable" || *st == "disable")))
                    return st->dump() + " is not valid for interface/" + name +
                           "/qos/pfc-watchdog/state (enable, disable)";
                // Only physical ports take a watchdog (user guide, "PFC Watchdog").
                if (*st == "enable" && name.rfind("swp", 0) != 0)
                    return "interface/" + name + ": PFC watchdog can only be enabled on a physical interface (swp)";
            }
    return "";
}

// What an apply refuses: a watchdog on a port without PFC (RoCE lossless mode
// gives every port PFC). "" when the revision can be applied.
std::string apply_problem(const json& tree) {
    const json* roce = at(tree, {"qos", "roce"});
    const bool lossless = roce && roce->value("enable", "off") == "on" && roce->value("mode", "lossless") == "lossless";
    if (const json* ifs = at(tree, {"interface"}); ifs && ifs->is_object())
        for (const auto& [name, i] : ifs->items()) {
            const json* st = at(i, {"qos", "pfc-watchdog", "state"});
            if (st && *st == "enable" && !lossless && !at(i, {"qos", "pfc"}) && !at(i, {"link", "flow-control"}))
                return "PFC watchdog on " + name + " needs PFC or link pause on the port";
        }
    return "";
}

}  // namespace

NvueService::NvueService(std::string user) : user_(std::move(user)) {
    // A fresh switch: RoCE off, no interface settings.
    applied_ = {{"qos", {{"roce", {{"enable", "off"}}}}}, {"interface", json::object()}};
}

Status NvueService::restore(const json& running) {
    if (!running.is_object()) return make_error("emulator", "emulator.state_malformed", "nvue state is not an object");
    applied_ = running;
    return ok_status();
}

Status NvueService::change_behind_back(const json& change) {
    if (!change.is_object()) return make_error("emulator", "emulator.bad_change", "expected a JSON merge patch object");
    applied_.merge_patch(change);
    return ok_status();
}

SwitchResponse NvueService::revision_op(const std::string& id, const SwitchRequest& request, ApplyGate& gate) {
    auto it = revisions_.find(id);
    if (it == revisions_.end()) return problem(404, "no revision " + id);
    Revision& rev = it->second;
    if (request.method == "GET") {
        // An apply finishes when it is next looked at.
        if (rev.state == "applying") {
            applied_ = rev.tree;
            rev.state = "applied";
        }
        json body = {{"state", rev.state}};
        if (!rev.issue.empty()) body["transition"] = {{"issue", {{"0", {{"message", rev.issue}}}}}};
        return reply(200, body);
    }
    if (request.method == "PATCH") {
        auto body = json::parse(request.body, nullptr, false);
        if (body.is_discarded() || !body.is_object()) return problem(400, "body is not a JSON object");
        if (body.value("state", "") != "apply") return problem(400, "only state \"apply\" is supported");
        if (rev.state != "pending") return problem(409, "revision is " + rev.state);
        const bool auto_yes = body.contains("auto-prompt") && body["auto-prompt"].value("ays", "") == "ays_yes";
        if (!auto_yes) {
            rev.state = "ays_fail";
            rev.issue = "apply needs a yes to its prompt (auto-prompt ays_yes)";
        } else if (const std::string why = apply_problem(rev.tree); !why.empty()) {
            rev.state = "invalid";
            rev.issue = why;
        } else if (!gate.allow_apply()) {
            rev.state = "apply_fail";
            rev.issue = "emulated apply failure";
        } else {
            rev.state = "applying";
        }
        return reply(200, {{"state", rev.state}});
    }
    return problem(405, "method not allowed");
}

SwitchResponse NvueService::handle(const SwitchRequest& request, ApplyGate& gate) {
    const std::string root = "/nvue_v1";
    if (request.path.rfind(root, 0) != 0) return problem(404, "not found");
    std::string rest = request.path.substr(root.size());
    if (!rest.empty() && rest[0] == '/') rest.erase(0, 1);

    if (rest == "revision") {
        if (request.method == "GET") {
            json all = json::object();
            for (const auto& [id, r] : revisions_) all[id] = {{"state", r.state}};
            return reply(200, all);
        }
        if (request.method != "POST") return problem(405, "method not allowed");
        // Old-style ids with '/' in them, as NVUE releases before 5.x gave.
        const std::string id = fmt::format("changeset/{}/kiln-{}", user_, next_++);
        revisions_[id] = Revision{"pending", applied_, ""};
        return reply(200, {{id, {{"state", "pending"}}}});
    }
    if (rest.rfind("revision/", 0) == 0) return revision_op(rest.substr(9), request, gate);

    const std::string rev = request.arg("rev");
    if (request.method == "GET") {
        const json* tree = &applied_;
        if (!rev.empty() && rev != "applied") {
            auto it = revisions_.find(rev);
            if (it == revisions_.end()) return problem(404, "no revision " + rev);
            tree = &it->second.tree;
        }
        const auto ptr = pointer(rest);
        if (!tree->contains(ptr)) return reply(200, json::object());
        return reply(200, tree->at(ptr));
    }
    if (request.method == "PATCH") {
        if (rev.empty()) return problem(400, "PATCH needs ?rev=<revision>");
        auto it = revisions_.find(rev);
        if (it == revisions_.end()) return problem(404, "no revision " + rev);
        if (it->second.state != "pending") return problem(409, "revision is " + it->second.state);
        auto body = json::parse(request.body, nullptr, false);
        if (body.is_discarded()) return problem(400, "body is not JSON");
        json tree = it->second.tree;
        const auto ptr = pointer(rest);
        if (ptr.empty()) {
            tree.merge_patch(body);
        } else {
            json sub = tree.contains(ptr) ? tree.at(ptr) : json::object();
            sub.merge_patch(body);
            tree[ptr] = sub;
        }
        // A value the schema refuses leaves the revision as it was.
        if (const std::string why = schema_problem(tree); !why.empty())
            return reply(400, {{"status", 400}, {"title", "Bad Request"}, {"detail", why}});
        it->second.tree = std::move(tree);
        const json& kept = it->second.tree;
        return reply(200, kept.contains(ptr) ? kept.at(ptr) : json::object());
    }
    return problem(405, "method not allowed");
}

}  // namespace kiln::network::emulator
