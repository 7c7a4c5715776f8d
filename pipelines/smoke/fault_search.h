// Fault localisation for a shared ring that failed: which members make it
// fail? The ring is split (halves, then smaller parts, then single members
// each run beside a member already cleared) and the all-reduce is run again
// on each part, until every member is either cleared (a part it was in
// passed) or named a suspect (a ring of it and cleared members failed), or
// the budget runs out. A part that passes clears all its members; when one
// half passes, the other is taken as failing without a run of its own (the
// whole ring failed), so one bad member in n costs about log2(n) runs plus
// its confirmation. Two or more bad members are each found the same way.
//
// Pure: the caller says how a ring is run (the smoke stage launches
// kiln-smoke on the members' VMs; tests inject a fault model).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln::smoke {

struct RingOutcome {
    bool pass = false;
    double figure = 0;   // the ring's bus bandwidth, for the record
    std::string detail;  // why it failed
};

// Runs the all-reduce on these members (at least two), in this order.
using RunRing = std::function<RingOutcome(const std::vector<std::string>& members)>;

struct SearchBudget {
    int max_runs = 64;
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    // The clock (tests may inject one); default steady_clock::now.
    std::function<std::chrono::steady_clock::time_point()> now;
};

struct SearchRun {
    std::vector<std::string> members;
    RingOutcome outcome;
};

struct SearchResult {
    std::vector<std::string> suspects;       // ring order
    std::vector<std::string> cleared;        // ring order
    std::map<std::string, std::string> why;  // suspect -> the evidence
    std::vector<SearchRun> runs;             // every run, in order
    bool complete = true;                    // false: the budget ran out; every member not cleared is a suspect
};

// `ring` failed as a whole (the caller's run of it). Needs two members or more.
SearchResult localise(const std::vector<std::string>& ring, const RunRing& run, const SearchBudget& budget = {});

}  // namespace kiln::smoke
