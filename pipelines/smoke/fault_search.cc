#include "pipelines/smoke/fault_search.h"

#include <algorithm>
#include <optional>
#include <set>

namespace kiln::smoke {

namespace {

class Search {
public:
    Search(const RunRing& run, const SearchBudget& budget) : run_(run), budget_(budget) {}

    void resolve(const std::vector<std::string>& group) {
        if (group.size() == 1) return single(group[0]);
        if (group.size() == 2) {
            // Each beside a cleared member, else nothing can tell them apart yet.
            single(group[0]);
            single(group[1]);
            return;
        }
        const auto mid = group.begin() + static_cast<long>((group.size() + 1) / 2);
        const std::vector<std::string> a(group.begin(), mid), b(mid, group.end());
        auto ra = test(a);
        if (!ra) return;
        if (ra->pass) {
            clear(a);
            resolve(b);  // the fault is in b: the group failed without it passing
            return;
        }
        resolve(a);
        if (b.size() == 1) return single(b[0]);
        auto rb = test(b);
        if (!rb) return;
        if (rb->pass)
            clear(b);
        else
            resolve(b);
    }

    // Members no run could test (no cleared partner when their turn came).
    void finish_deferred() {
        // Nothing cleared yet (every part failed: bad members on both
        // sides): pairs of the untested until one passes gives a partner.
        for (size_t i = 0; cleared_.empty() && i < deferred_.size(); ++i)
            for (size_t j = i + 1; cleared_.empty() && j < deferred_.size(); ++j) {
                auto r = test({deferred_[i], deferred_[j]});
                if (!r) return;
                if (r->pass) clear({deferred_[i], deferred_[j]});
            }
        auto deferred = std::move(deferred_);
        deferred_.clear();
        for (const auto& m : deferred) {
            if (cleared_.empty())
                suspect(m, "no member passed a ring, so none could be tested apart");
            else
                single(m);
        }
    }

    SearchResult result(const std::vector<std::string>& ring) {
        SearchResult r;
        r.complete = !out_of_budget_;
        for (const auto& m : ring) {
            if (cleared_.count(m))
                r.cleared.push_back(m);
            else {
                r.suspects.push_back(m);
                r.why[m] = why_.count(m) ? why_[m] : "not cleared within the localisation budget";
            }
        }
        r.runs = std::move(runs_);
        return r;
    }

private:
    std::optional<RingOutcome> test(const std::vector<std::string>& members) {
        const auto now = budget_.now ? budget_.now() : std::chrono::steady_clock::now();
        if (static_cast<int>(runs_.size()) >= budget_.max_runs || now >= budget_.deadline) {
            out_of_budget_ = true;
            return std::nullopt;
        }
        RingOutcome o = run_(members);
        runs_.push_back({members, o});
        return o;
    }

    void single(const std::string& m) {
        if (cleared_.count(m) || why_.count(m)) return;
        if (cleared_.empty()) {
            deferred_.push_back(m);
            return;
        }
        const std::string partner = *cleared_order_.begin();
        auto r = test({m, partner});
        if (!r) return;
        if (r->pass)
            clear({m});
        else
            suspect(m, "the ring of " + m + " and " + partner + " (cleared) failed" +
                           (r->detail.empty() ? "" : ": " + r->detail));
    }

    void clear(const std::vector<std::string>& ms) {
        for (const auto& m : ms)
            if (!why_.count(m) && cleared_.insert(m).second) cleared_order_.push_back(m);
        // A member cleared now may be the partner a deferred one waited for.
        if (!deferred_.empty() && !cleared_.empty()) finish_deferred();
    }

    void suspect(const std::string& m, const std::string& why) { why_[m] = why; }

    const RunRing& run_;
    const SearchBudget& budget_;
    std::set<std::string> cleared_;
    std::vector<std::string> cleared_order_;
    std::map<std::string, std::string> why_;
    std::vector<std::string> deferred_;
    std::vector<SearchRun> runs_;
    bool out_of_budget_ = false;
};

}  // namespace

SearchResult localise(const std::vector<std::string>& ring, const RunRing& run, const SearchBudget& budget) {
    Search s(run, budget);
    s.resolve(ring);
    s.finish_deferred();
    return s.result(ring);
}

}  // namespace kiln::smoke
