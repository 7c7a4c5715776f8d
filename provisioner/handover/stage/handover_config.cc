#include "provisioner/handover/stage/handover_config.h"

#include "provisioner/config/toml_reader.h"

namespace kiln::handover {

namespace {

HandoverHook read_hook(config::TableReader& r, config::TableScope& scope) {
    const toml::table& t = r.table();
    const auto& ctx = r.ctx();
    HandoverHook h;
    h.pos = r.pos();
    if (auto v = r.strings("command")) {
        if (v->empty()) ctx.error(t.get("command")->source(), "handover.command", "expected a non-empty argv");
        h.command = *v;
    }
    if (auto v = r.str("webhook")) {
        if (auto problem = config::http_url_problem(*v); !problem.empty())
            ctx.error(t.get("webhook")->source(), "handover.webhook", problem);
        h.webhook = *v;
    }
    h.webhook_secret = scope.secret(r, "secret");
    if (auto v = r.duration("timeout")) h.timeout = *v;
    const bool has_cmd = t.get("command") != nullptr, has_hook = t.get("webhook") != nullptr;
    if (has_cmd == has_hook) ctx.error(t.source(), "handover", "expected exactly one of 'command' or 'webhook'");
    if (t.get("secret") && !has_hook)
        ctx.error(t.get("secret")->source(), "handover.secret", "only used with 'webhook'");
    return h;
}

}  // namespace

config::ConfigTable handover_table() {
    return {kHandoverTable,
            [](config::TableReader& r, config::TableScope& scope) -> std::any { return read_hook(r, scope); }};
}

const HandoverHook* handover_hook(const config::Fleet& fleet) {
    return fleet.table<HandoverHook>(kHandoverTable);
}

void set_handover_hook(config::Fleet& fleet, HandoverHook hook) {
    config::TableValue v;
    v.pos = hook.pos;
    if (hook.webhook_secret) v.secrets.push_back(*hook.webhook_secret);
    v.value = std::move(hook);
    fleet.tables[kHandoverTable] = std::move(v);
}

}  // namespace kiln::handover
