// Fleet-relative verdicts: beside its absolute floor, each VM's figure is
// held against the median of the same figure over its ring (a node's own
// VMs, or every VM of a rack or fleet ring). Median and MAD (median absolute
// deviation) because one bad member must not drag the yardstick with it, as
// a mean would. A member below `floor` x median stands out; the smoke stage
// warns or fails it as the fleet says.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::smoke {

// Fewer figures than this say nothing about a typical member.
inline constexpr size_t kMinRelativeSamples = 3;

struct Sample {
    std::string member;  // "node/vm"
    double figure = 0;
};

struct Spread {
    size_t n = 0;
    double median = 0;
    double mad = 0;  // median of |figure - median|
};

Spread spread_of(std::vector<double> figures);

// Where one member sits in the distribution.
struct Standing {
    std::string member;
    double figure = 0;
    double fraction = 0;             // figure / median
    std::optional<double> robust_z;  // (figure - median) / (1.4826 MAD); none when MAD is 0
    bool below = false;              // fraction < floor
};

struct RelativeCheck {
    Spread spread;
    std::vector<Standing> standings;  // in the samples' order
};

// For a floor-type figure (higher is better). nullopt when there are fewer
// than kMinRelativeSamples figures or the median is not positive: nothing to
// compare with (the absolute floor still holds).
std::optional<RelativeCheck> compare_with_median(const std::vector<Sample>& samples, double floor);

}  // namespace kiln::smoke
