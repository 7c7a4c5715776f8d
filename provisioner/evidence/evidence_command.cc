#include "provisioner/evidence/evidence_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "provisioner/evidence/evidence_bundle.h"

namespace kiln::evidence {

using nlohmann::json;

void add_evidence_command(CLI::App& command, EvidenceArgs& args) {
    command.add_option("FLEET", args.fleet, "fleet config (TOML)")->required();
    command.add_option("NODE", args.node, "the node (usually a quarantined one)")->required();
    command.add_option("--out", args.out,
                       "the archive to write (default: .kiln/evidence/NODE-TIMESTAMP.tar.gz beside the fleet)");
    command.add_flag(
        "--json", args.json,
        R"(as {"node", "archive", "files": [{"path", "sha256", "bytes", "source"}], "parts": [{"name", "status"}]})");
}

int cmd_evidence(const EvidenceArgs& args, const EvidenceFleetLoader& load, const EvidenceJournalReader& open_journal,
                 std::vector<std::string> extra_secrets) {
    auto fleet = load(args.fleet);
    if (!fleet) return 1;
    const config::Node* node = fleet->find_node(args.node);
    if (!node) {
        std::fprintf(stderr, "kiln: evidence: no node '%s' in %s; nothing was written\n", args.node.c_str(),
                     args.fleet.c_str());
        return 1;
    }
    BundleRequest rq;
    rq.fleet = &*fleet;
    rq.node = node;
    rq.out = args.out;
    rq.extra_secrets = std::move(extra_secrets);
    std::unique_ptr<journal::Store> store;
    if (auto opened = open_journal(*fleet); !opened) {
        rq.store_unavailable = opened.error().message;
    } else {
        store = std::move(*opened);
        if (!store) rq.store_unavailable = "no journal yet (nothing was ever applied)";
    }
    rq.store = store.get();
    auto report = write_bundle(rq);
    if (!report) {
        std::fprintf(stderr, "kiln: %s\n", report.error().str().c_str());
        return 1;
    }
    json unavailable = json::array();
    for (const auto& p : report->manifest["parts"])
        if (p.value("status", "") != "included") unavailable.push_back(p);
    if (args.json) {
        json out = report->manifest;
        out["archive"] = report->archive;
        std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    std::printf("%s: evidence bundle written to %s (%zu files)\n", node->name.c_str(), report->archive.c_str(),
                report->files.size());
    for (const auto& f : report->files) std::printf("  %-44s %s\n", f.path.c_str(), f.source.c_str());
    for (const auto& p : unavailable)
        std::printf("  ! %s: %s\n", p.value("name", "").c_str(), p.value("status", "").c_str());
    const int redacted = report->manifest["secret_scan"].value("redactions", 0);
    if (redacted > 0) std::printf("  %d secret occurrence%s redacted\n", redacted, redacted == 1 ? "" : "s");
    return 0;
}

engine::StageCommandSpec evidence_command() {
    return engine::args_command<EvidenceArgs>(
        "evidence",
        "write one node's evidence bundle for a vendor RMA case: a .tar.gz holding its failing smoke checks and\n"
        "every fault-localisation run, the BMC's log entries (SEL/IML/event log), recent BMC tasks, part serials\n"
        "and firmware versions (Redfish), the VMs' serial consoles, GPU state when the guests reported it, and\n"
        "the node's journal history, with a manifest.json giving each file's sha256 and source. A part that\n"
        "cannot be gathered (an unreachable BMC) is named in the manifest as \"unavailable: <why>\". No secret of\n"
        "the fleet is in any file: each is scrubbed and checked. Quarantined nodes get one automatically\n"
        "(under .kiln/evidence beside the fleet).",
        add_evidence_command, [](const EvidenceArgs& a, const engine::CommandEnv& env) {
            return cmd_evidence(a, env.load_fleet, env.open_journal, env.extra_secrets);
        });
}

}  // namespace kiln::evidence
