// `kiln evidence FLEET NODE [--out FILE] [--json]`: writes the node's
// evidence bundle (provisioner/evidence/evidence_bundle.h), the archive a
// crew attaches to a vendor RMA case. Reads the node's BMC over Redfish
// (changes nothing on it), its smoke result, VM serial logs and journal.
// Exit 0 when the archive was written, even with parts marked unavailable
// in its manifest; 1 when nothing was written.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/engine/stage_command.h"
#include "provisioner/journal/store.h"

namespace kiln::evidence {

struct EvidenceArgs {
    std::string fleet;
    std::string node;
    std::string out;
    bool json = false;
};

// Fills in `kiln evidence` (created by the CLI shell).
void add_evidence_command(CLI::App& command, EvidenceArgs& args);

using EvidenceFleetLoader = std::function<std::optional<config::Fleet>(const std::string& path)>;
using EvidenceJournalReader = std::function<Result<std::unique_ptr<journal::Store>>(const config::Fleet&)>;
// `extra_secrets`: resolved secrets given outside the fleet (--store-password),
// kept out of the bundle like the fleet's own.
int cmd_evidence(const EvidenceArgs& args, const EvidenceFleetLoader& load, const EvidenceJournalReader& open_journal,
                 std::vector<std::string> extra_secrets = {});

// `kiln evidence`, as the product registers it beside the handover stage.
engine::StageCommandSpec evidence_command();

}  // namespace kiln::evidence
