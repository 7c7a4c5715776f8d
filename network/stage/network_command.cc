#include "network/stage/network_command.h"

#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "network/eos/eos_driver.h"
#include "network/fabric.h"
#include "network/host/host_runner.h"
#include "network/host/host_scope.h"
#include "network/nvue/nvue_driver.h"
#include "network/sonic/render.h"
#include "network/sonic/yang_validator.h"
#include "network/switch_drivers.h"
#include "network/switch_scope.h"

namespace kiln::network {

namespace {

using nlohmann::json;

void print_error(const std::string& message) {
    std::fprintf(stderr, "kiln: %s\n", message.c_str());
}

Result<json> render_one(const config::Fleet& fleet, const FabricSwitch& fs, const std::string& format) {
    if (format == "sonic") {
        auto db = sonic::render_switch(fleet, fs);
        if (!db) return db.error();
        return db->json();
    }
    auto profile = profile_for_switch(fleet, fs);
    if (!profile) return profile.error();
    if (format == "nvue") return nvue::render_nvue(**profile, fs.ports);
    return eos::render_eos(**profile, fs.ports);
}

int cmd_render(const NetworkArgs& args, const config::Fleet& fleet) {
    auto fabric = build_fabric(fleet);
    if (!fabric) {
        print_error(fabric.error().str());
        return 1;
    }
    std::vector<const FabricSwitch*> chosen;
    std::string format = args.format;
    if (!args.switch_name.empty()) {
        const FabricSwitch* fs = fabric->find_switch(args.switch_name);
        if (!fs) {
            std::string names;
            for (const auto& s : fabric->switches) names += (names.empty() ? "" : ", ") + s.name;
            print_error(fmt::format("no switch '{}' in {}; defined: {}", args.switch_name, fleet.path,
                                    names.empty() ? "(none)" : names));
            return 1;
        }
        if (format.empty()) format = fs->os;
        chosen.push_back(fs);
    } else {
        if (format.empty()) format = "sonic";
        for (const auto& s : fabric->switches)
            if (s.os == format) chosen.push_back(&s);
    }
    if (args.validate && format != "sonic") {
        print_error("--validate checks SONiC tables against the YANG models: use it with --format sonic");
        return 1;
    }
    std::optional<sonic::YangValidator> validator;
    if (args.validate) {
        auto v = args.yang_dir.empty() ? sonic::YangValidator::load() : sonic::YangValidator::load(args.yang_dir);
        if (!v) {
            print_error(v.error().str());
            return 1;
        }
        validator.emplace(std::move(*v));
    }
    json all = json::object();
    int invalid = 0;
    for (const auto* fs : chosen) {
        auto cfg = render_one(fleet, *fs, format);
        if (!cfg) {
            print_error(fmt::format("switch {}: {}", fs->name, cfg.error().message));
            return 1;
        }
        if (validator) {
            for (const auto& issue : validator->check(*cfg)) {
                std::fprintf(stderr, "switch %s: table %s, key %s, field %s: %s\n", fs->name.c_str(),
                             issue.table.c_str(), issue.key.empty() ? "-" : issue.key.c_str(),
                             issue.field.empty() ? "-" : issue.field.c_str(), issue.message.c_str());
                ++invalid;
            }
        }
        all[fs->name] = std::move(*cfg);
    }
    if (invalid) {
        print_error(fmt::format("{} YANG issue{}; the rendered config is not valid", invalid, invalid == 1 ? "" : "s"));
        return 1;
    }
    if (!args.switch_name.empty())
        std::printf("%s\n", all[args.switch_name].dump(2).c_str());
    else
        std::printf("%s\n", all.dump(2).c_str());
    return 0;
}

int cmd_drift(const NetworkArgs& args, const config::Fleet& fleet) {
    auto fabric = build_fabric(fleet);
    if (!fabric) {
        print_error(fabric.error().str());
        return 1;
    }
    if (!args.switch_name.empty() && !fleet.find_switch(args.switch_name)) {
        print_error(fmt::format("no switch '{}' in {}", args.switch_name, fleet.path));
        return 1;
    }
    SwitchDriverDeps deps;
    deps.http = std::make_shared<net::CurlHttpClient>();
    json changes = json::array();
    json errors = json::array();
    json checked = json::array();
    for (const auto& sw : fleet.switches) {
        if (!args.switch_name.empty() && sw.name != args.switch_name) continue;
        auto scope = scope_for_switch(fleet, *fabric, sw);
        if (!scope) {
            errors.push_back({{"switch", sw.name}, {"error", scope.error().message}});
            continue;
        }
        if (scope->ports.empty()) continue;  // nothing cabled: nothing kiln manages there
        auto driver = make_switch_driver(fleet, sw, deps);
        if (!driver) {
            errors.push_back({{"switch", sw.name}, {"error", driver.error().message}});
            continue;
        }
        auto cmp = compare_switch(**driver, *scope);
        if (!cmp) {
            errors.push_back({{"switch", sw.name}, {"error", cmp.error().message}});
            continue;
        }
        checked.push_back(sw.name);
        for (const auto& c : cmp->changes) changes.push_back(change_json(sw.name, c));
    }
    // Host NICs of nodes with a managed host; --switch narrows to that switch only.
    json host_drift = json::array();
    json host_warnings = json::array();
    json hosts_checked = json::array();
    for (const auto& node : fleet.nodes) {
        if (!args.switch_name.empty()) break;
        auto hs = host::host_scope_for_node(fleet, node);
        if (!hs.managed) continue;
        auto runner = host::make_host_runner(node);
        auto seen = runner ? host::reconcile_host_nics(**runner, node, hs, false)
                           : Result<std::vector<host::NicResult>>(runner.error());
        if (!seen) {
            errors.push_back({{"node", node.name}, {"error", seen.error().message}});
            continue;
        }
        hosts_checked.push_back(node.name);
        const json state = host::host_nics_json(node, *seen);
        for (const auto& d : host::host_drift_entries(node.name, state)) host_drift.push_back(d);
        const auto findings = host::host_nic_findings(state);
        for (const auto& b : findings.blocking) errors.push_back({{"node", node.name}, {"error", b}});
        // Firmware waiting for a reboot kiln cannot do (a local or netns host) and required: an error too.
        if (node.host.mode != "ssh")
            for (const auto& b : findings.firmware_blocking) errors.push_back({{"node", node.name}, {"error", b}});
        for (const auto& w : findings.warnings) host_warnings.push_back({{"node", node.name}, {"warning", w}});
    }
    if (args.json) {
        json doc = {{"fleet", fleet.name}, {"switches_checked", checked}, {"drift", changes}, {"errors", errors}};
        doc["hosts_checked"] = hosts_checked;
        doc["host_drift"] = host_drift;
        doc["host_warnings"] = host_warnings;
        std::printf("%s\n", doc.dump(2).c_str());
    } else {
        for (const auto& c : changes) {
            // A switch-wide leaf is named by its path: "switch-priority" alone is ambiguous.
            const std::string port = c["port"].get<std::string>();
            const std::string where =
                port.empty() ? "(switch) " + c["path"].get<std::string>() : port + " " + c["field"].get<std::string>();
            std::printf("%s %s: running %s, want %s\n", c["switch"].get<std::string>().c_str(), where.c_str(),
                        c["running"].is_null() ? "(absent)" : c["running"].dump().c_str(),
                        c["desired"].is_null() ? "(absent)" : c["desired"].dump().c_str());
        }
        for (const auto& d : host_drift)
            std::printf("%s %s\n", d["node"].get<std::string>().c_str(), d["text"].get<std::string>().c_str());
        for (const auto& w : host_warnings)
            std::fprintf(stderr, "kiln: warning: node %s NIC %s\n", w["node"].get<std::string>().c_str(),
                         w["warning"].get<std::string>().c_str());
        for (const auto& e : errors) {
            const bool is_node = e.contains("node");
            std::fprintf(stderr, "kiln: %s %s: %s\n", is_node ? "node" : "switch",
                         e[is_node ? "node" : "switch"].get<std::string>().c_str(),
                         e["error"].get<std::string>().c_str());
        }
        const size_t diffs = changes.size() + host_drift.size();
        const std::string hosts = hosts_checked.empty() ? ""
                                                        : fmt::format(" and {} host{}", hosts_checked.size(),
                                                                      hosts_checked.size() == 1 ? "" : "s");
        std::printf("Drift: %zu difference%s on %zu switch%s%s checked, %zu error%s.\n", diffs, diffs == 1 ? "" : "s",
                    checked.size(), checked.size() == 1 ? "" : "es", hosts.c_str(), errors.size(),
                    errors.size() == 1 ? "" : "s");
    }
    if (!errors.empty()) return 1;
    return changes.empty() && host_drift.empty() ? 0 : 2;
}

}  // namespace

void add_network_commands(CLI::App& command, NetworkArgs& args) {
    command.require_subcommand(1);
    args.render = command.add_subcommand("render", "print the config kiln would put on switches (JSON)");
    args.render->add_option("fleet", args.fleet, "fleet.toml")->required();
    args.render->add_option("--switch", args.switch_name, "one switch (default: every switch of the format's OS)");
    args.render->add_option("--format", args.format, "sonic | nvue | eos (default: the switch's OS, else sonic)")
        ->check(CLI::IsMember({"sonic", "nvue", "eos"}));
    args.render->add_flag("--validate", args.validate, "check SONiC tables against the YANG models");
    args.render->add_option("--yang-dir", args.yang_dir, "SONiC YANG models to validate with");
    args.drift =
        command.add_subcommand("drift", "compare switches' running config and managed hosts' NICs with the profile");
    args.drift->add_option("fleet", args.fleet, "fleet.toml")->required();
    args.drift->add_option("--switch", args.switch_name, "only this switch (host NICs are then not checked)");
    args.drift->add_flag("--json", args.json, "as JSON");
}

int cmd_network(const NetworkArgs& args, const FleetLoader& load) {
    auto fleet = load(args.fleet);
    if (!fleet) return 1;
    if (args.render && *args.render) return cmd_render(args, *fleet);
    return cmd_drift(args, *fleet);
}

engine::StageCommandSpec network_command() {
    return engine::args_command<NetworkArgs>(
        "network", "the RoCE fabric: render switch configs, find drift on switches and host NICs", add_network_commands,
        [](const NetworkArgs& a, const engine::CommandEnv& env) { return cmd_network(a, env.load_fleet); });
}

}  // namespace kiln::network
