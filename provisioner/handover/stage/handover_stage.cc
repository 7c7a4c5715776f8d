#include "provisioner/handover/stage/handover_stage.h"

#include "provisioner/engine/published.h"
#include "provisioner/journal/store.h"

namespace kiln::handover {

using nlohmann::json;

HandoverStage::HandoverStage(HandoverOptions options)
    : options_(std::move(options)),
      hooks_(options_.commands ? options_.commands : std::make_shared<ProcessRunner>(),
             options_.http ? options_.http : std::make_shared<net::CurlHttpClient>()) {}

json handover_document(const config::Fleet& fleet, const std::string& node, const std::string& state,
                       const smoke::SmokeRecord* smoke) {
    json failed = json::array();
    json checks = json::array();
    std::string verdict = "not run";
    if (smoke) {
        verdict = smoke->verdict;
        failed = smoke->document.value("failed", json::array());
        for (const auto& vm : smoke->vms)
            for (const auto& c : vm.checks)
                checks.push_back({{"vm", vm.vm},
                                  {"name", c.name},
                                  {"figure", c.figure ? json(*c.figure) : json(nullptr)},
                                  {"threshold", c.threshold ? json(*c.threshold) : json(nullptr)},
                                  {"unit", c.unit},
                                  {"verdict", c.verdict}});
    }
    return {{"fleet", fleet.name},
            {"node", node},
            {"state", state},
            {"failed_checks", failed},
            {"smoke", {{"verdict", verdict}, {"checks", checks}}},
            {"ts_ms", journal::now_ms()}};
}

Result<std::optional<HandoverRecord>> latest_handover(const engine::StageContext& ctx) {
    return engine::latest_published<HandoverRecord>(
        ctx, kRecordKind, "handover", kRecordSchema,
        [](const json& body, int schema, const std::string& node) { return read_handover_record(body, schema, node); });
}

Result<engine::Observation> HandoverStage::observe(engine::StageContext& ctx) {
    engine::Observation o;
    auto rec = latest_handover(ctx);
    if (!rec) return rec.error();
    o.state = *rec ? json{{"state", (*rec)->state}, {"input_hash", (*rec)->input_hash}} : json{{"state", nullptr}};
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
                    (handover_hook(ctx.fleet()) ? " and run the handover hook" : " (no hook configured)");
    return std::vector<engine::Action>{a};
}

Status HandoverStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    if (action.id != "handover:ready") return make_error("handover", "handover.action", "unknown action " + action.id);
    const auto& node = ctx.node().name;
    auto smoke_result = smoke::latest_smoke_result(ctx);
    if (!smoke_result) return smoke_result.error();
    const smoke::SmokeRecord* smoke = *smoke_result ? &**smoke_result : nullptr;
    // A smoke result that failed (a pipeline that ran handover anyway, or a
    // stale pass overwritten by a failure) never becomes "ready".
    if (smoke && !smoke->passed()) {
        notify_quarantined(ctx, smoke->document);
        Error e = make_error("handover", "handover.quarantined",
                             "quarantined: failed checks: " + smoke::describe_failures(smoke->document));
        e.quarantine = true;
        return e;
    }
    const json doc = handover_document(ctx.fleet(), node, "ready", smoke);
    std::string hook_said = "no hook configured";
    if (const HandoverHook* hook = handover_hook(ctx.fleet())) {
        auto r = hooks_.run(*hook, doc.dump());
        if (!r) return r.error();
        hook_said = *r;
    }
    HandoverRecord rec;
    rec.state = "ready";
    rec.input_hash = ctx.input_hash();
    rec.summary = "ready; " + hook_said;
    rec.hook = hook_said;
    rec.smoke = smoke ? smoke->verdict : "not run";
    rec.ts_ms = journal::now_ms();
    if (auto s = ctx.publish(kRecordKind, kRecordSchema, rec.to_json()); !s) return s;
    ctx.event("handover", rec.summary);
    return ok_status();
}

Status HandoverStage::verify(engine::StageContext& ctx) {
    auto rec = latest_handover(ctx);
    if (!rec) return rec.error();
    if (!*rec || !(*rec)->ready_for(ctx.input_hash()))
        return make_error("handover", "handover.not_ready", ctx.node().name + " was not handed over");
    return ok_status();
}

void HandoverStage::notify_quarantined(engine::StageContext& ctx, const json& smoke_result) {
    const auto& node = ctx.node().name;
    auto typed = smoke::read_smoke_record(smoke_result, smoke::kResultSchema, node);
    const json doc = handover_document(ctx.fleet(), node, "quarantined", typed ? &*typed : nullptr);
    std::string hook_said = "no hook configured";
    if (const HandoverHook* hook = handover_hook(ctx.fleet())) {
        auto r = hooks_.run(*hook, doc.dump());
        hook_said = r ? *r : "hook failed: " + r.error().message;
        if (!r) ctx.event("handover.hook_failed", r.error().message);
    }
    HandoverRecord rec;
    rec.state = "quarantined";
    rec.summary = "quarantined: " + smoke::describe_failures(smoke_result) + "; " + hook_said;
    rec.hook = hook_said;
    rec.smoke = smoke_result.value("verdict", "fail");
    rec.failed = smoke_result.value("failed", json::array());
    rec.ts_ms = journal::now_ms();
    // Never fails the caller (the node is quarantined either way): a record
    // the journal would not take is said in an event.
    if (auto s = ctx.publish(kRecordKind, kRecordSchema, rec.to_json()); !s)
        ctx.event("handover.record_failed", s.error().message);
    ctx.event("handover", rec.summary);
}

}  // namespace kiln::handover
