// The bundle written when the smoke stage quarantines a node (wired to
// SmokeStageOptions::on_quarantine in product_stages.cc): at the default
// path (.kiln/evidence/<node>-<time>.tar.gz beside the fleet), with the
// history from the fleet's journal ([store], else .kiln/journal.db; a run
// with --journal elsewhere gets its history through `kiln evidence`). The
// path, or why there is none, is journaled as an "evidence" event. Never
// fails the caller: the quarantine stands whatever happens here.
#pragma once

#include <string>

#include "provisioner/engine/stage.h"

namespace kiln::evidence {

struct QuarantineEvidenceOptions {
    std::string smoke_state_dir;  // "" = the smoke stage's default
};

// The archive written, or "" when none could be (the event says why).
std::string write_quarantine_evidence(engine::StageContext& ctx, const QuarantineEvidenceOptions& options = {});

}  // namespace kiln::evidence
