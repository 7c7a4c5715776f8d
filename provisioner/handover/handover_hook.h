// Runs the fleet's [handover] hook with the handover document: a command
// (argv, no shell) that reads the JSON on stdin, or an HTTP POST of the same
// JSON to a webhook, signed with HMAC-SHA256 when a secret is configured.
// Both are bounded by the hook's timeout. The secret is resolved at the
// moment of signing and appears in no message this returns.
#pragma once

#include <memory>
#include <string>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/core/result.h"
#include "provisioner/handover/stage/handover_config.h"
#include "provisioner/net/http_client.h"

namespace kiln::handover {

class HookRunner {
public:
    HookRunner(std::shared_ptr<CommandRunner> commands, std::shared_ptr<net::HttpClient> http)
        : commands_(std::move(commands)), http_(std::move(http)) {}

    // One line saying what happened ("command /bin/cat: exit 0",
    // "webhook https://h/path: HTTP 200"), or an error: a failing command or
    // a non-2xx answer is an error (transient: worth retrying).
    Result<std::string> run(const HandoverHook& hook, const std::string& document);

private:
    std::shared_ptr<CommandRunner> commands_;
    std::shared_ptr<net::HttpClient> http_;
};

}  // namespace kiln::handover
