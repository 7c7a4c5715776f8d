#include "network/stage/network_stage.h"

#include <set>

#include <fmt/format.h>

#include "network/fabric.h"
#include "network/switch_drivers.h"
#include "network/switch_scope.h"

namespace kiln::network {

namespace {

using nlohmann::json;

const std::string kActionPrefix = "configure:";

std::string summary(const std::vector<ConfigChange>& changes) {
    std::string out;
    for (size_t i = 0; i < changes.size() && i < 3; ++i) out += (i ? "; " : "") + changes[i].describe();
    if (changes.size() > 3) out += fmt::format("; and {} more", changes.size() - 3);
    return out;
}

}  // namespace

NetworkStage::NetworkStage(DriverFactory factory) : factory_(std::move(factory)) {
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
    obs.state["host_nics"] = "not observed: the host NIC applier (network/host) is not wired into this stage yet";
    return obs;
}

Result<std::vector<engine::Action>> NetworkStage::plan(engine::StageContext&, const engine::Observation& observed) {
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
    return actions;
}

Status NetworkStage::apply(engine::StageContext& ctx, const engine::Action& action) {
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
    return ok_status();
}

}  // namespace kiln::network
