#include "network/emulator/eapi_service.h"

#include <regex>

#include <fmt/format.h>

namespace kiln::network::emulator {

namespace {

using nlohmann::json;

// Commands EOS accepts in each mode (enough for kiln's config and tests).
// Watchdog times: seconds with two decimals (polling-interval three), as
// Arista's AVD schema has them; actions drop, errdisable, notify-only.
bool known_line(const std::vector<std::string>& mode, const std::string& line) {
    static const std::regex top(
        R"(^(qos map dscp \d+ to traffic-class \d|priority-flow-control pause watchdog (default (timeout|recovery-time) \d+(\.\d{1,2})?|default polling-interval \d+(\.\d{1,3})?|action (drop|errdisable|notify-only))|hostname \S+)$)");
    static const std::regex intf(
        R"(^(mtu \d+|qos trust (dscp|cos)|priority-flow-control (on|off)|priority-flow-control priority \d no-drop|priority-flow-control pause watchdog|description .*|shutdown)$)");
    static const std::regex txq(
        R"(^random-detect ecn minimum-threshold \d+ kbytes maximum-threshold \d+ kbytes max-mark-probability \d+$)");
    if (mode.empty()) return std::regex_match(line, top);
    if (mode.size() == 1) return std::regex_match(line, intf);
    return std::regex_match(line, txq);
}

json* mode_node(json& tree, const std::vector<std::string>& mode) {
    json* cur = &tree;
    for (const auto& m : mode) {
        json& cmds = (*cur)["cmds"];
        if (!cmds.is_object()) cmds = json::object();
        json& child = cmds[m];
        if (!child.is_object()) child = {{"cmds", json::object()}};
        cur = &child;
    }
    json& cmds = (*cur)["cmds"];
    if (!cmds.is_object()) cmds = json::object();
    return cur;
}

void set_line(json& node, const std::string& line) {
    json& cmds = node["cmds"];
    const std::string key = eos_line_key(line);
    for (auto it = cmds.begin(); it != cmds.end();) {
        if (eos_line_key(it.key()) == key && it.key() != line)
            it = cmds.erase(it);
        else
            ++it;
    }
    if (!cmds.contains(line)) cmds[line] = nullptr;
}

void remove_line(json& node, const std::string& line) {
    json& cmds = node["cmds"];
    const std::string key = eos_line_key(line);
    for (auto it = cmds.begin(); it != cmds.end();) {
        if (it.key() == line || eos_line_key(it.key()) == key)
            it = cmds.erase(it);
        else
            ++it;
    }
}

}  // namespace

const std::vector<EosModel>& emulated_eos_models() {
    // Arista's chipset mapping: Trident3 and Tomahawk switches queue with
    // tx-queue, the Sand (Jericho, Jericho2) VOQ ones with uc-tx-queue.
    static const std::vector<EosModel> models = {
        {"DCS-7050CX3-32S", "Trident3", false},
        {"DCS-7060CX2-32S", "Tomahawk", false},
        {"DCS-7280SR-48C6", "Jericho", true},
        {"DCS-7280CR3-32P4", "Jericho2", true},
    };
    return models;
}

const EosModel* find_eos_model(const std::string& name) {
    for (const auto& m : emulated_eos_models())
        if (name == m.name) return &m;
    return nullptr;
}

// Lines that enter a sub-mode, by the mode they are typed in.
bool EapiService::enters_mode(const std::vector<std::string>& mode, const std::string& line) const {
    if (mode.empty()) return line.rfind("interface ", 0) == 0;
    if (mode.size() == 1) return line.rfind(model_.voq ? "uc-tx-queue " : "tx-queue ", 0) == 0;
    return false;
}

std::string eos_line_key(const std::string& line) {
    static const std::vector<std::pair<std::regex, std::string>> rules = {
        {std::regex(R"(^(mtu) \d+$)"), "$1"},
        {std::regex(R"(^(qos trust) \S+$)"), "$1"},
        {std::regex(R"(^(qos map dscp \d+) to traffic-class \d+$)"), "$1"},
        {std::regex(R"(^(priority-flow-control) (on|off)$)"), "$1 on|off"},
        {std::regex(R"(^(priority-flow-control pause watchdog default (timeout|recovery-time|polling-interval)) \S+$)"),
         "$1"},
        {std::regex(R"(^(priority-flow-control pause watchdog action) \S+$)"), "$1"},
        {std::regex(R"(^(random-detect ecn) .*$)"), "$1"},
        {std::regex(R"(^(hostname) \S+$)"), "$1"},
        {std::regex(R"(^(description) .*$)"), "$1"},
    };
    for (const auto& [re, fmt] : rules)
        if (std::regex_match(line, re)) return std::regex_replace(line, re, fmt);
    return line;
}

EapiService::EapiService(const std::string& model) {
    const EosModel* m = find_eos_model(model);
    model_ = m ? *m : *find_eos_model(kDefaultEosModel);
    running_ = {{"cmds", json::object()}};
}

Status EapiService::restore(const json& running) {
    if (!running.is_object() || !running.contains("cmds"))
        return make_error("emulator", "emulator.state_malformed", "eos state has no cmds");
    running_ = running;
    return ok_status();
}

Status EapiService::change_behind_back(const json& change) {
    if (!change.is_object() || !change.contains("cmds") || !change["cmds"].is_array())
        return make_error("emulator", "emulator.bad_change", "expected {\"cmds\": [config lines]}");
    Cursor cur;
    cur.tree = &running_;
    cur.config = true;
    cur.enabled = true;
    struct Always : ApplyGate {
        bool allow_apply() override { return true; }
    } gate;
    for (const auto& c : change["cmds"]) {
        if (!c.is_string()) return make_error("emulator", "emulator.bad_change", "cmds must be strings");
        json result;
        std::string error;
        if (!run(c.get<std::string>(), cur, result, error, gate))
            return make_error("emulator", "emulator.bad_change", c.get<std::string>() + ": " + error);
    }
    return ok_status();
}

bool EapiService::run(const std::string& raw, Cursor& cur, json& result, std::string& error, ApplyGate& gate) {
    std::string cmd = raw;
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    while (!cmd.empty() && cmd.front() == ' ') cmd.erase(0, 1);
    result = json::object();
    if (cmd == "enable") {
        cur.enabled = true;
        return true;
    }
    if (cmd == "show version") {
        result = {{"modelName", model_.name},      {"version", "4.31.2F"},
                  {"architecture", "x86_64"},      {"hardwareRevision", "11.00"},
                  {"serialNumber", "KILNEMU0001"}, {"systemMacAddress", "00:1c:73:00:00:01"}};
        return true;
    }
    if (cmd == "show running-config") {
        result = running_;  // a session's pending lines are not running
        return true;
    }
    if (!cur.enabled) {
        error = "command needs privileged mode (run enable first)";
        return false;
    }
    if (cmd == "configure" || cmd == "configure terminal") {
        cur.config = true;
        cur.tree = &running_;
        cur.mode.clear();
        return true;
    }
    if (cmd.rfind("configure session ", 0) == 0) {
        const std::string name = cmd.substr(18);
        auto [it, fresh] = sessions_.try_emplace(name, running_);
        (void)fresh;
        cur.session = name;
        cur.tree = &it->second;
        cur.config = true;
        cur.mode.clear();
        return true;
    }
    if (!cur.config) {
        error = fmt::format("invalid command '{}'", cmd);
        return false;
    }
    if (cmd == "end") {
        cur.config = false;
        cur.mode.clear();
        return true;
    }
    if (cmd == "exit") {
        if (cur.mode.empty())
            cur.config = false;
        else
            cur.mode.pop_back();
        return true;
    }
    if (cmd == "commit" || cmd == "abort") {
        if (cur.session.empty()) {
            error = "not in a configure session";
            return false;
        }
        if (cmd == "commit") {
            if (!gate.allow_apply()) {
                error = "commit failed: emulated apply failure";
                return false;
            }
            running_ = *cur.tree;
        }
        sessions_.erase(cur.session);
        cur.session.clear();
        cur.tree = &running_;
        cur.config = false;
        cur.mode.clear();
        return true;
    }
    const bool negate = cmd.rfind("no ", 0) == 0;
    const std::string line = negate ? cmd.substr(3) : cmd;
    // Leaving a sub-mode by typing a command of an outer one, as the CLI allows.
    std::vector<std::string> mode = cur.mode;
    while (true) {
        if (enters_mode(mode, line) || known_line(mode, line)) break;
        if (mode.empty()) {
            error = fmt::format("invalid command '{}'", cmd);
            return false;
        }
        mode.pop_back();
    }
    cur.mode = mode;
    json* node = mode_node(*cur.tree, cur.mode);
    if (enters_mode(cur.mode, line)) {
        if (negate) {
            (*node)["cmds"].erase(line);
            return true;
        }
        cur.mode.push_back(line);
        mode_node(*cur.tree, cur.mode);
        return true;
    }
    if (negate)
        remove_line(*node, line);
    else
        set_line(*node, line);
    return true;
}

SwitchResponse EapiService::handle(const SwitchRequest& request, ApplyGate& gate) {
    auto rpc_error = [](const json& id, int code, const std::string& message, const json& data) {
        json e = {{"code", code}, {"message", message}};
        if (!data.is_null()) e["data"] = data;
        return SwitchResponse{200, json{{"jsonrpc", "2.0"}, {"id", id}, {"error", e}}.dump(), "application/json"};
    };
    if (request.path != "/command-api") return {404, R"({"error":"not found"})", "application/json"};
    if (request.method != "POST") return {405, R"({"error":"POST only"})", "application/json"};
    auto body = json::parse(request.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return rpc_error(nullptr, -32700, "parse error", nullptr);
    const json id = body.value("id", json(nullptr));
    if (body.value("method", "") != "runCmds") return rpc_error(id, -32601, "method not found", nullptr);
    const json params = body.value("params", json::object());
    if (params.value("version", json(1)) != json(1) && params.value("version", json(1)) != json("latest"))
        return rpc_error(id, -32602, "unsupported version", nullptr);
    if (!params.contains("cmds") || !params["cmds"].is_array())
        return rpc_error(id, -32602, "params.cmds must be an array", nullptr);

    Cursor cur;
    cur.tree = &running_;
    json results = json::array();
    for (const auto& c : params["cmds"]) {
        std::string cmd;
        if (c.is_string())
            cmd = c.get<std::string>();
        else if (c.is_object() && c.contains("cmd") && c["cmd"].is_string())
            cmd = c["cmd"].get<std::string>();
        else
            return rpc_error(id, -32602, "each command is a string or {\"cmd\": ...}", nullptr);
        json result;
        std::string error;
        if (!run(cmd, cur, result, error, gate)) {
            json data = results;
            data.push_back({{"errors", {error}}});
            // A session left open by a failed call is EOS's behaviour too;
            // the client aborts it.
            return rpc_error(id, 1002,
                             fmt::format("CLI command {} of {} '{}' failed: {}", results.size() + 1,
                                         params["cmds"].size(), cmd, error),
                             data);
        }
        results.push_back(result);
    }
    return {200, json{{"jsonrpc", "2.0"}, {"id", id}, {"result", results}}.dump(), "application/json"};
}

}  // namespace kiln::network::emulator
