#include "provisioner/handover/handover_hook.h"

#include "provisioner/handover/hmac_signature.h"
#include "provisioner/net/url.h"

namespace kiln::handover {

namespace {
std::string first_line(const std::string& s, size_t cap) {
    std::string t = s.substr(0, s.find('\n'));
    return t.size() > cap ? t.substr(0, cap) + "..." : t;
}
}  // namespace

Result<std::string> HookRunner::run(const HandoverHook& hook, const std::string& document) {
    if (!hook.command.empty()) {
        CommandSpec spec;
        spec.argv = hook.command;
        spec.stdin_data = document;
        spec.timeout = hook.timeout;
        spec.max_output = 1u << 20;
        auto r = commands_->run(spec);
        const std::string what = "handover command " + describe_argv(hook.command);
        if (!r) return make_error("handover", "handover.hook", what + ": " + r.error().message);
        if (r->timed_out)
            return make_error("handover", "handover.hook",
                              what + ": timed out after " + std::to_string(hook.timeout.count() / 1000) + " s", true);
        if (!r->success())
            return make_error("handover", "handover.hook",
                              what + ": " +
                                  (r->signal ? "killed by signal " + std::to_string(r->signal)
                                             : "exit " + std::to_string(r->exit_code)) +
                                  (r->err.empty() ? "" : ": " + first_line(r->err, 200)),
                              true);
        return what + ": exit 0";
    }
    if (!hook.webhook.empty()) {
        net::HttpRequest req;
        req.method = "POST";
        req.url = hook.webhook;
        req.body = document;
        req.timeout = hook.timeout;
        req.connect_timeout = std::min(hook.timeout, std::chrono::milliseconds(10000));
        req.headers.emplace_back("Content-Type", "application/json");
        req.headers.emplace_back("User-Agent", "kiln-handover");
        if (hook.webhook_secret) {
            auto key = hook.webhook_secret->resolve();
            // The reference ("env:NAME") is safe to name; the value never is.
            if (!key)
                return make_error("handover", "handover.secret",
                                  "webhook secret " + hook.webhook_secret->reference() + ": " + key.error().message);
            req.headers.emplace_back(kSignatureHeader, signature_header_value(*key, document));
        }
        // The URL as people may see it: no userinfo, no query.
        const std::string shown = "webhook " + net::url_for_log(hook.webhook);
        auto resp = http_->send(req);
        if (!resp) return make_error("handover", "handover.hook", shown + ": " + resp.error().message, true);
        if (resp->status < 200 || resp->status >= 300)
            return make_error("handover", "handover.hook", shown + ": HTTP " + std::to_string(resp->status),
                              resp->status >= 500 || resp->status == 429);
        return shown + ": HTTP " + std::to_string(resp->status);
    }
    return std::string("no hook configured");
}

}  // namespace kiln::handover
