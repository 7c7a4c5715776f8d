#include "network/emulator/nvue_service.h"

#include <fmt/format.h>

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
            std::string esc;
            for (char c : seg) esc += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
            p += "/" + esc;
        }
        start = end + 1;
    }
    return json::json_pointer(p);
}

}  // namespace

NvueService::NvueService(std::string user) : user_(std::move(user)) {
    // A fresh switch: RoCE off, no interface settings.
    applied_ = {{"qos", {{"roce", {{"enable", "off"}}}}}, {"interface", json::object()}};
}

Status NvueService::restore(const json& running) {
    if (!running.is_object()) return make_error("emulator", "state_malformed", "nvue state is not an object");
    applied_ = running;
    return ok_status();
}

Status NvueService::change_behind_back(const json& change) {
    if (!change.is_object()) return make_error("emulator", "bad_change", "expected a JSON merge patch object");
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
        json& tree = it->second.tree;
        const auto ptr = pointer(rest);
        if (ptr.empty()) {
            tree.merge_patch(body);
        } else {
            json sub = tree.contains(ptr) ? tree.at(ptr) : json::object();
            sub.merge_patch(body);
            tree[ptr] = sub;
        }
        return reply(200, tree.contains(ptr) ? tree.at(ptr) : json::object());
    }
    return problem(405, "method not allowed");
}

}  // namespace kiln::network::emulator
