// The `kiln` command line: parses arguments, loads and validates the fleet,
// and runs one command. The same entry point serves the shipped binary and
// the test driver (which registers test-only stages).
#pragma once

#include "provisioner/engine/stage_registry.h"

namespace kiln::cli {

// Exit codes (stable): 0 success / converged, 1 error or a node failed,
// 2 `plan --detailed-exitcode` found work, 130 stopped by a signal.
int run_cli(int argc, char** argv, const engine::StageRegistry& registry);

}  // namespace kiln::cli
