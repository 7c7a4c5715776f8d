#include "network/stage/network_stage.h"

#include <set>

#include <fmt/format.h>

#include "network/fabric.h"
#include "network/host/host_runner.h"
#include "network/host/host_scope.h"
#include "network/switch_drivers.h"
#include "network/switch_scope.h"

namespace kiln::network {

namespace {

using nlohmann::json;

const std::string kActionPrefix = "configure:";
const std::string kHostActionPrefix = "host-nics:";

std::string summary(const std::vector<ConfigChange>& changes) {
    std::string out;
    for (size_t i = 0; i < changes.size() && i < 3; ++i) out += (i ? "; " : "") + changes[i].describe();
    if (changes.size() > 3) out += fmt::format("; and {} more", changes.size() - 3);
    return out;
}

std::string first_lines(const std::vector<std::string>& lines, size_t max = 3) {
    std::string out;
    for (size_t i = 0; i < lines.size() && i < max; ++i) out += (i ? "; " : "") + lines[i];
    if (lines.size() > max) out += fmt::format("; and {} more", lines.size() - max);
    return out;
}

}  // namespace

NetworkStage::NetworkStage(DriverFactory factory, HostRunnerFactory hosts)
    : factory_(std::move(factory)), hosts_(std::move(hosts)) {
    if (!hosts_) hosts_ = [](const config::Node& node) { return host::make_host_runner(node); };
    if (!factory_) {
        // One HTTP client for every switch: it keeps connections per thread.
        auto deps = std::make_shared<SwitchDriverDeps>();
        deps->http = std::make_shared<net::CurlHttpClient>();
        factory_ = [deps](const config::Fleet& fleet, const config::Switch& sw) {
            return make_switch_driver(fleet, sw, *deps);
        };
    }
}

std::vector<std::string> NetworkStage::resources(const config::Fleet& fleet, const config::Node& node) const {
    std::set<std::string> names;
    for (const config::Cable* c : fleet.cables_of(node.name)) names.insert(c->switch_name);
    std::vector<std::string> out;
    for (const auto& n : names) out.push_back("switch:" + n);
    return out;
}

Result<engine::Observation> NetworkStage::observe(engine::StageContext& ctx) {
    auto fabric = build_fabric(ctx.fleet());
    if (!fabric) return fabric.error();
    auto scopes = scopes_for_node(ctx.fleet(), *fabric, ctx.node());
    if (!scopes) return scopes.error();
    engine::Observation obs;
    json switches = json::array();
    for (const auto& scope : *scopes) {
        if (ctx.should_stop()) return make_error("network", "stopped", "stopped while reading switches");
        ctx.progress(fmt::format("reading {}", scope.sw->name));
        auto driver = factory_(ctx.fleet(), *scope.sw);
        if (!driver) return driver.error();
        auto cmp = compare_switch(**driver, scope);
        if (!cmp) return cmp.error();
        json changes = json::array();
        for (const auto& c : cmp->changes) changes.push_back(change_json(scope.sw->name, c));
        json ports = json::array();
        for (const auto& p : scope.ports) ports.push_back(p.name);
        switches.push_back({{"switch", scope.sw->name}, {"os", scope.sw->os}, {"ports", ports}, {"changes", changes}});
    }
    obs.state["switches"] = switches;

    const config::Node& node = ctx.node();
    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) {
        obs.state["host_nics"] = host::host_not_managed_json(hs.why_not);
        return obs;
    }
    if (ctx.should_stop()) return make_error("network", "stopped", "stopped before reading host NICs");
    ctx.progress(fmt::format("reading host NICs ({})", node.host.describe()));
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    auto nics = host::reconcile_host_nics(**runner, node, hs, false);
    if (!nics) return nics.error();
    obs.state["host_nics"] = host::host_nics_json(node, *nics);
    if (hs.nics.empty())
        obs.notes.push_back("host NICs: the node lists no nics, so there is nothing to set on its host");
    for (const auto& w : host::host_nic_findings(obs.state["host_nics"]).warnings) obs.notes.push_back("host NIC " + w);
    return obs;
}

Result<std::vector<engine::Action>> NetworkStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    std::vector<engine::Action> actions;
    for (const auto& s : observed.state.value("switches", json::array())) {
        const auto& changes = s["changes"];
        if (changes.empty()) continue;
        std::vector<std::string> texts;
        std::string desc = fmt::format("configure {} ({}): {} change{}", s["switch"].get<std::string>(),
                                       s["os"].get<std::string>(), changes.size(), changes.size() == 1 ? "" : "s");
        for (size_t i = 0; i < changes.size() && i < 3; ++i)
            desc += (i ? "; " : ": ") + changes[i]["text"].get<std::string>();
        if (changes.size() > 3) desc += fmt::format("; and {} more", changes.size() - 3);
        actions.push_back({kActionPrefix + s["switch"].get<std::string>(),
                           desc,
                           {{"switch", s["switch"]}, {"os", s["os"]}, {"changes", changes}}});
    }
    // Host NICs after the switches: the ports are lossless before the host tags traffic.
    const json host_nics = observed.state.value("host_nics", json::object());
    const auto findings = host::host_nic_findings(host_nics);
    const std::string& node = ctx.node().name;
    if (!findings.blocking.empty())
        return make_error("network", "host-nic-required",
                          fmt::format("node {}: {}", node, first_lines(findings.blocking, 8)));
    if (!findings.work.empty()) {
        std::string desc =
            fmt::format("set host NICs of {} ({}): {} change{}: {}", node, host_nics.value("host", ""),
                        findings.work.size(), findings.work.size() == 1 ? "" : "s", first_lines(findings.work));
        const int unsupported = host_nics.value("counts", json::object()).value("unsupported", 0);
        if (unsupported)
            desc += fmt::format(" ({} unsupported setting{} left as is)", unsupported, unsupported == 1 ? "" : "s");
        actions.push_back({kHostActionPrefix + node, desc, {{"host", host_nics["host"]}, {"items", findings.work}}});
    }
    return actions;
}

Status NetworkStage::apply_host(engine::StageContext& ctx) {
    const config::Node& node = ctx.node();
    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) return make_error("network", "host-not-managed", hs.why_not);
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    ctx.progress(fmt::format("setting host NICs ({})", node.host.describe()));
    auto done = host::reconcile_host_nics(**runner, node, hs, true);
    if (!done) return done.error();
    for (const auto& r : *done)
        for (const auto& i : r.report.items)
            if (i.outcome == host::NicOutcome::Changed)
                ctx.progress(fmt::format("{}{} {}", r.nic, r.nic == r.report.ifname ? "" : " (" + r.report.ifname + ")",
                                         i.str()));
    // apply() leaves no drift: what is left as work here failed.
    const auto failed = host::host_nic_findings(host::host_nics_json(node, *done)).work;
    if (!failed.empty())
        return make_error("network", "host-nic-failed",
                          fmt::format("node {} host NICs: {}", node.name, first_lines(failed, 8)));
    return ok_status();
}

Status NetworkStage::verify_host(engine::StageContext& ctx) {
    const config::Node& node = ctx.node();
    auto hs = host::host_scope_for_node(ctx.fleet(), node);
    if (!hs.managed) return ok_status();
    auto runner = hosts_(node);
    if (!runner) return runner.error();
    auto seen = host::reconcile_host_nics(**runner, node, hs, false);
    if (!seen) return seen.error();
    const auto findings = host::host_nic_findings(host::host_nics_json(node, *seen));
    if (!findings.blocking.empty())
        return make_error("network", "host-nic-required",
                          fmt::format("node {}: {}", node.name, first_lines(findings.blocking, 8)));
    if (!findings.work.empty())
        return make_error(
            "network", "verify-failed",
            fmt::format("node {} host NICs still differ after apply: {}", node.name, first_lines(findings.work)));
    return ok_status();
}

Status NetworkStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    if (action.id == kHostActionPrefix + ctx.node().name) return apply_host(ctx);
    if (action.id.rfind(kActionPrefix, 0) != 0)
        return make_error("network", "bad-action", "unknown network action " + action.id);
    const std::string name = action.id.substr(kActionPrefix.size());
    auto fabric = build_fabric(ctx.fleet());
    if (!fabric) return fabric.error();
    auto scopes = scopes_for_node(ctx.fleet(), *fabric, ctx.node());
    if (!scopes) return scopes.error();
    for (const auto& scope : *scopes) {
        if (scope.sw->name != name) continue;
        auto driver = factory_(ctx.fleet(), *scope.sw);
        if (!driver) return driver.error();
        // Diff again: the switch may have changed since the plan, or an
        // earlier run may have done this already.
        auto cmp = compare_switch(**driver, scope);
        if (!cmp) return cmp.error();
        if (cmp->changes.empty()) return ok_status();
        ctx.progress(
            fmt::format("applying {} change{} to {}", cmp->changes.size(), cmp->changes.size() == 1 ? "" : "s", name));
        return (*driver)->apply(cmp->desired, cmp->running);
    }
    return make_error("network", "bad-action",
                      fmt::format("node {} is not cabled to switch {}", ctx.node().name, name));
}

Status NetworkStage::verify(engine::StageContext& ctx) {
    auto fabric = build_fabric(ctx.fleet());
    if (!fabric) return fabric.error();
    auto scopes = scopes_for_node(ctx.fleet(), *fabric, ctx.node());
    if (!scopes) return scopes.error();
    for (const auto& scope : *scopes) {
        auto driver = factory_(ctx.fleet(), *scope.sw);
        if (!driver) return driver.error();
        auto cmp = compare_switch(**driver, scope);
        if (!cmp) return cmp.error();
        if (!cmp->changes.empty())
            return make_error(
                "network", "verify-failed",
                fmt::format("switch {} still differs after apply: {}", scope.sw->name, summary(cmp->changes)));
    }
    return verify_host(ctx);
}

}  // namespace kiln::network
