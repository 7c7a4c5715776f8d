#include "pipelines/smoke/relative_verdict.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kiln::smoke {

namespace {
double median_of(std::vector<double>& v) {
    const size_t n = v.size();
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(v.begin(), mid, v.end());
    const double hi = *mid;
    if (n % 2) return hi;
    return (*std::max_element(v.begin(), mid) + hi) / 2;
}
}  // namespace

Spread spread_of(std::vector<double> figures) {
    Spread s;
    s.n = figures.size();
    if (figures.empty()) return s;
    s.median = median_of(figures);
    for (auto& f : figures) f = std::fabs(f - s.median);
    s.mad = median_of(figures);
    return s;
}

std::optional<RelativeCheck> compare_with_median(const std::vector<Sample>& samples, double floor) {
    if (samples.size() < kMinRelativeSamples) return std::nullopt;
    std::vector<double> figures;
    for (const auto& s : samples) figures.push_back(s.figure);
    RelativeCheck r;
    r.spread = spread_of(figures);
    if (!(r.spread.median > 0)) return std::nullopt;
    // 1.4826 MAD estimates the standard deviation of a normal distribution.
    const double sigma = 1.4826 * r.spread.mad;
    for (const auto& s : samples) {
        Standing st;
        st.member = s.member;
        st.figure = s.figure;
        st.fraction = s.figure / r.spread.median;
        if (sigma > 0) st.robust_z = (s.figure - r.spread.median) / sigma;
        st.below = st.fraction < floor;
        r.standings.push_back(std::move(st));
    }
    return r;
}

}  // namespace kiln::smoke
