// Every check runs under a watchdog: a check that does not return within its
// bound (a hung peer, a wedged GPU) becomes a failed check with the reason,
// and kiln-smoke still prints its document. The hung thread is abandoned;
// kiln-smoke leaves with _exit so nothing waits for it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "pipelines/smoke/check.h"

namespace kiln::smoke {

using CheckFn = std::function<std::vector<Check>()>;

// Runs `fn` on its own thread. When it does not finish within `bound`, every
// name in `expected` comes back as a failed check ("timed out after ...").
// An exception from `fn` becomes a failed check too.
std::vector<Check> run_bounded(const std::vector<std::string>& expected, std::chrono::milliseconds bound, CheckFn fn);

// Set once any check was abandoned: the caller must _exit, not return.
bool any_abandoned();

}  // namespace kiln::smoke
