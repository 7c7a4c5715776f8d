#include "provisioner/handover/handover_stage.h"

#include <filesystem>

#include "pipelines/smoke/smoke_result_store.h"
#include "provisioner/journal/store.h"

namespace kiln::handover {

using nlohmann::json;

HandoverStage::HandoverStage(HandoverOptions options)
    : options_(std::move(options)),
      hooks_(options_.commands ? options_.commands : std::make_shared<ProcessRunner>(),
             options_.http ? options_.http : std::make_shared<net::CurlHttpClient>()) {}

std::string HandoverStage::state_dir(const config::Fleet& fleet) const {
    if (!options_.state_dir.empty()) return options_.state_dir;
    return (std::filesystem::path(fleet.dir) / ".kiln" / "handover").string();
}

json handover_document(const config::Fleet& fleet, const std::string& node, const std::string& state,
                       const json* smoke) {
    json failed = json::array();
    json checks = json::array();
    std::string verdict = "not run";
    if (smoke) {
        verdict = smoke->value("verdict", "fail");
        if (smoke->contains("failed")) failed = (*smoke)["failed"];
        if (smoke->contains("vms"))
            for (const auto& vm : (*smoke)["vms"]) {
                if (!vm.contains("report") || !vm["report"].is_object()) continue;
                for (const auto& c : vm["report"].value("checks", json::array()))
                    checks.push_back({{"vm", vm.value("vm", "")},
                                      {"name", c.value("name", "")},
                                      {"figure", c.value("figure", json(nullptr))},
                                      {"threshold", c.value("threshold", json(nullptr))},
                                      {"unit", c.value("unit", "")},
                                      {"verdict", c.value("verdict", "")}});
            }
    }
    return {{"fleet", fleet.name},
            {"node", node},
            {"state", state},
            {"failed_checks", failed},
            {"smoke", {{"verdict", verdict}, {"checks", checks}}},
            {"ts_ms", journal::now_ms()}};
}

Result<engine::Observation> HandoverStage::observe(engine::StageContext& ctx) {
    engine::Observation o;
    auto rec = smoke::load_result(state_dir(ctx.fleet()), ctx.node().name);
    o.state = rec ? json{{"state", rec->value("state", "")}, {"input_hash", rec->value("input_hash", "")}}
                  : json{{"state", nullptr}};
    return o;
}

Result<std::vector<engine::Action>> HandoverStage::plan(engine::StageContext& ctx,
                                                        const engine::Observation& observed) {
    const bool done = observed.state.value("state", json(nullptr)) == "ready" &&
                      observed.state.value("input_hash", "") == ctx.input_hash();
    if (done && !ctx.reimage()) return std::vector<engine::Action>{};
    engine::Action a;
    a.id = "handover:ready";
    a.description = "hand " + ctx.node().name + " over" +
                    (ctx.fleet().handover ? " and run the handover hook" : " (no hook configured)");
    return std::vector<engine::Action>{a};
}

Status HandoverStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    if (action.id != "handover:ready") return make_error("handover", "handover.action", "unknown action " + action.id);
    const auto& node = ctx.node().name;
    auto smoke_result = smoke::load_result(smoke::smoke_state_dir(ctx.fleet(), options_.smoke_state_dir), node);
    // A smoke result that failed (a pipeline that ran handover anyway, or a
    // stale pass overwritten by a failure) never becomes "ready".
    if (smoke_result && smoke_result->value("verdict", "") != "pass") {
        notify_quarantined(ctx, *smoke_result);
        Error e = make_error("handover", "handover.quarantined",
                             "quarantined: failed checks: " + smoke::describe_failures(*smoke_result));
        e.quarantine = true;
        return e;
    }
    const json doc = handover_document(ctx.fleet(), node, "ready", smoke_result ? &*smoke_result : nullptr);
    std::string hook_said = "no hook configured";
    if (ctx.fleet().handover) {
        auto r = hooks_.run(*ctx.fleet().handover, doc.dump());
        if (!r) return r.error();
        hook_said = *r;
    }
    json rec = {{"state", "ready"},
                {"input_hash", ctx.input_hash()},
                {"hook", hook_said},
                {"ts_ms", journal::now_ms()},
                {"smoke", smoke_result ? smoke_result->value("verdict", "") : "not run"}};
    if (auto s = smoke::save_result(state_dir(ctx.fleet()), node, rec); !s) return s;
    ctx.event("handover", "ready; " + hook_said);
    return ok_status();
}

Status HandoverStage::verify(engine::StageContext& ctx) {
    auto rec = smoke::load_result(state_dir(ctx.fleet()), ctx.node().name);
    if (!rec || rec->value("state", "") != "ready" || rec->value("input_hash", "") != ctx.input_hash())
        return make_error("handover", "handover.not_ready", ctx.node().name + " was not handed over");
    return ok_status();
}

void HandoverStage::notify_quarantined(engine::StageContext& ctx, const json& smoke_result) {
    const auto& node = ctx.node().name;
    const json doc = handover_document(ctx.fleet(), node, "quarantined", &smoke_result);
    std::string hook_said = "no hook configured";
    if (ctx.fleet().handover) {
        auto r = hooks_.run(*ctx.fleet().handover, doc.dump());
        hook_said = r ? *r : "hook failed: " + r.error().message;
        if (!r) ctx.event("handover.hook_failed", r.error().message);
    }
    json rec = {{"state", "quarantined"},
                {"input_hash", ""},
                {"hook", hook_said},
                {"ts_ms", journal::now_ms()},
                {"failed", smoke_result.value("failed", json::array())}};
    (void)smoke::save_result(state_dir(ctx.fleet()), node, rec);
    ctx.event("handover", "quarantined: " + smoke::describe_failures(smoke_result) + "; " + hook_said);
}

}  // namespace kiln::handover
