#include "provisioner/evidence/quarantine_evidence.h"

#include <filesystem>

#include "provisioner/evidence/evidence_bundle.h"
#include "provisioner/journal/open_store.h"

namespace kiln::evidence {

std::string write_quarantine_evidence(engine::StageContext& ctx, const nlohmann::json& smoke_result) {
    const auto& fleet = ctx.fleet();
    journal::StoreSpec spec;
    if (fleet.store) {
        spec.url = fleet.store->url;
        spec.password = fleet.store->password;
    } else {
        spec.sqlite_path = (std::filesystem::path(fleet.dir) / ".kiln" / "journal.db").string();
    }
    BundleRequest rq;
    rq.fleet = &fleet;
    rq.node = &ctx.node();
    rq.smoke_result = smoke_result;
    rq.wait = [&ctx](std::chrono::milliseconds d) { return ctx.wait_for(d); };
    std::unique_ptr<journal::Store> store;
    if (auto opened = journal::open_store_reader(spec); !opened) {
        rq.store_unavailable = opened.error().message;
    } else {
        store = std::move(*opened);
        if (!store) rq.store_unavailable = "no journal at " + spec.where();
    }
    rq.store = store.get();
    try {
        auto report = write_bundle(rq);
        if (!report) {
            ctx.event("evidence.failed", report.error().message);
            return "";
        }
        ctx.event("evidence", "bundle written: " + report->archive);
        return report->archive;
    } catch (const std::exception& e) {
        ctx.event("evidence.failed", std::string("evidence bundle: ") + e.what());
        return "";
    }
}

}  // namespace kiln::evidence
