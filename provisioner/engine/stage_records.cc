#include "provisioner/engine/stage_records.h"

#include <string>

namespace kiln::engine {

void wire_records(StageContext& ctx, journal::Store* store, int64_t run_id) {
    if (!store) return;
    StageContext::PublishFn publish;
    if (run_id != 0)
        publish = [store, run_id, &ctx](const std::string& kind, int schema, const nlohmann::json& body) {
            return store->put_record({run_id, ctx.node().name, ctx.stage(), kind, schema, body.dump(), 0});
        };
    auto latest = [store](const std::string& node,
                          const std::string& kind) -> Result<std::optional<StageContext::Published>> {
        auto r = store->latest_record(node, kind);
        if (!r) return r.error();
        if (!*r) return std::optional<StageContext::Published>();
        auto body = nlohmann::json::parse((*r)->body, nullptr, false);
        if (body.is_discarded())
            return make_error("journal", "journal.record",
                              "the " + kind + " record of " + node + " in the journal is not JSON (run " +
                                  std::to_string((*r)->run_id) + ", stage " + (*r)->stage + ")");
        return std::optional<StageContext::Published>(
            StageContext::Published{(*r)->kind, (*r)->schema, std::move(body), (*r)->run_id, (*r)->stage, (*r)->ts_ms});
    };
    ctx.set_records(std::move(publish), std::move(latest));
}

}  // namespace kiln::engine
