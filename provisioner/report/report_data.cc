#include "provisioner/report/report_data.h"

#include <algorithm>
#include <map>
#include <set>

#include "provisioner/handover/handover_record.h"
#include "provisioner/journal/legacy_state.h"

namespace kiln::report {

namespace {

// The node's newest smoke and handover records, typed; where the journal
// has none, the files an older kiln kept (journal/legacy_state.h). One
// this kiln cannot read is shown as a warning, not dropped in silence.
Status read_records(journal::Store& store, const config::Fleet& fleet, NodeReport& nr) {
    auto smoke_rec = store.latest_record(nr.name, smoke::kResultKind);
    if (!smoke_rec) return smoke_rec.error();
    if (*smoke_rec) {
        auto r = smoke::read_smoke_record(**smoke_rec);
        if (r)
            nr.smoke = std::move(*r);
        else
            nr.warnings.push_back({"smoke", r.error().message});
    } else if (auto legacy = journal::read_legacy_state(fleet.dir, "smoke", nr.name)) {
        if (auto r = smoke::read_smoke_record(*legacy, smoke::kResultSchema, nr.name)) nr.smoke = std::move(*r);
    }
    auto hand = store.latest_record(nr.name, handover::kRecordKind);
    if (!hand) return hand.error();
    if (*hand) {
        auto r = handover::read_handover_record(**hand);
        if (r)
            nr.handover = r->summary;
        else
            nr.warnings.push_back({"handover", r.error().message});
    } else if (auto legacy = journal::read_legacy_state(fleet.dir, "handover", nr.name)) {
        if (auto r = handover::read_handover_record(*legacy, handover::kRecordSchema, nr.name))
            nr.handover = r->state + "; " + r->hook;
    }
    return ok_status();
}

}  // namespace

Result<ReportData> collect_report(const config::Fleet& fleet, journal::Store* store, int max_runs) {
    ReportData d;
    d.fleet = fleet.name;
    d.fleet_path = fleet.path;
    d.generated_ms = journal::now_ms();
    std::map<std::string, journal::NodeState> states;
    std::set<int64_t> shown_runs;
    if (store) {
        auto runs = store->runs(max_runs > 0 ? max_runs : 1000000);
        if (!runs) return runs.error();
        d.runs.assign(runs->rbegin(), runs->rend());
        for (const auto& r : d.runs) shown_runs.insert(r.id);
        auto st = store->node_states();
        if (!st) return st.error();
        for (auto& s : *st) states[s.node] = s;
    }
    for (const auto& n : fleet.nodes) {
        NodeReport nr;
        nr.name = n.name;
        nr.rack = n.rack;
        if (auto it = states.find(n.name); it != states.end()) {
            nr.state = it->second.state;
            nr.detail = it->second.detail;
            nr.stage = it->second.stage;
            nr.error = it->second.error;
        }
        if (store) {
            auto recs = store->stage_records(n.name);
            if (!recs) return recs.error();
            for (auto& r : *recs)
                if (shown_runs.count(r.run_id)) nr.stages.push_back(std::move(r));
            auto hist = store->history(n.name, 0);  // newest first
            if (!hist) return hist.error();
            const int64_t newest_run = hist->empty() ? 0 : hist->front().run_id;
            for (const auto& e : *hist)
                if (e.kind == "event" && e.name == "warning" && e.run_id == newest_run)
                    nr.warnings.insert(nr.warnings.begin(), {e.stage, e.text});
            if (auto s = read_records(*store, fleet, nr); !s) return s.error();
        }
        d.nodes.push_back(std::move(nr));
    }
    return d;
}

}  // namespace kiln::report
