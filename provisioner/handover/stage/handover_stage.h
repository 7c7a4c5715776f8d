// The "handover" stage: the node is ready (the smoke job passed) or
// quarantined (with the failing checks), published in the journal as the
// "handover" record (handover_record.h). Either way the fleet's [handover]
// hook hears about it with one JSON document:
//   {"fleet","node","state":"ready"|"quarantined","failed_checks":[...],
//    "smoke":{"verdict","checks":[{"vm","name","figure","threshold","unit","verdict"}]},"ts_ms"}
// The engine ends a node's pipeline at a stage that quarantines it, so the
// smoke stage calls notify_quarantined() (wired in product_stages.cc).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/smoke_record.h"
#include "provisioner/engine/stage.h"
#include "provisioner/handover/handover_hook.h"
#include "provisioner/handover/handover_record.h"
#include "provisioner/handover/stage/handover_inputs.h"

namespace kiln::handover {

struct HandoverOptions {
    std::shared_ptr<CommandRunner> commands;  // default ProcessRunner
    std::shared_ptr<net::HttpClient> http;    // default CurlHttpClient
};

class HandoverStage : public engine::Stage {
public:
    explicit HandoverStage(HandoverOptions options = {});
    std::string name() const override { return "handover"; }
    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override {
        return handover_inputs(ctx.fleet(), ctx.node());
    }
    bool hands_over() const override { return true; }
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

    // A quarantined node: runs the hook with the failing checks and records
    // it. Never fails the caller: a hook problem is journaled as an event.
    void notify_quarantined(engine::StageContext& ctx, const nlohmann::json& smoke_result);

private:
    HandoverOptions options_;
    HookRunner hooks_;
};

// The document for the hook (exposed for tests). `smoke`: null when the
// node has no smoke result.
nlohmann::json handover_document(const config::Fleet& fleet, const std::string& node, const std::string& state,
                                 const smoke::SmokeRecord* smoke);

// The node's verdict, for a stage: its newest record in the journal, else
// the file an older kiln kept (journal/legacy_state.h). nullopt: none.
Result<std::optional<HandoverRecord>> latest_handover(const engine::StageContext& ctx);

}  // namespace kiln::handover
