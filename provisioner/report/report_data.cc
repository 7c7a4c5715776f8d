#include "provisioner/report/report_data.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::report {

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
            for (const auto& e : *hist) {
                if (e.kind != "event") continue;
                if (e.name == "warning" && e.run_id == newest_run)
                    nr.warnings.insert(nr.warnings.begin(), {e.stage, e.text});
                if (!nr.smoke && e.name == "smoke.result") {
                    auto j = nlohmann::json::parse(e.text, nullptr, false);
                    if (!j.is_discarded()) nr.smoke = std::move(j);
                }
                if (nr.handover.empty() && e.name == "handover") nr.handover = e.text;
            }
        }
        d.nodes.push_back(std::move(nr));
    }
    return d;
}

}  // namespace kiln::report
