// The bundle written when the smoke stage quarantines a node (wired to
// SmokeStageOptions::on_quarantine in product_stages.cc): at the default
// path (.kiln/evidence/<node>-<time>.tar.gz beside the fleet), with the
// history from the fleet's journal ([store], else .kiln/journal.db; a run
// with --journal elsewhere gets its history through `kiln evidence`). The
// path, or why there is none, is journaled as an "evidence" event. Never
// fails the caller: the quarantine stands whatever happens here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/engine/stage.h"

namespace kiln::evidence {

// `smoke_result`: the result that quarantined the node, packed as it is
// (the run's journal may be another than the fleet's). The archive
// written, or "" when none could be (the event says why).
std::string write_quarantine_evidence(engine::StageContext& ctx, const nlohmann::json& smoke_result);

}  // namespace kiln::evidence
