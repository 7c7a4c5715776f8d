#include "pipelines/smoke/check.h"

#include <cmath>

namespace kiln::smoke {

const char* verdict_name(Verdict v) {
    switch (v) {
        case Verdict::Pass:
            return "pass";
        case Verdict::Fail:
            return "fail";
        case Verdict::Skip:
            return "skip";
    }
    return "fail";
}

std::optional<Verdict> parse_verdict(const std::string& s) {
    if (s == "pass") return Verdict::Pass;
    if (s == "fail") return Verdict::Fail;
    if (s == "skip") return Verdict::Skip;
    return std::nullopt;
}

void Check::judge() {
    if (verdict == Verdict::Fail || verdict == Verdict::Skip) return;
    if (!std::isfinite(figure)) {
        verdict = Verdict::Fail;
        if (detail.empty()) detail = "figure is not a finite number";
        return;
    }
    if (!threshold) {
        verdict = Verdict::Pass;
        return;
    }
    const bool ok = compare == "<=" ? figure <= *threshold : figure >= *threshold;
    verdict = ok ? Verdict::Pass : Verdict::Fail;
}

Verdict Report::verdict() const {
    for (const auto& c : checks)
        if (c.verdict == Verdict::Fail) return Verdict::Fail;
    return Verdict::Pass;
}

}  // namespace kiln::smoke
