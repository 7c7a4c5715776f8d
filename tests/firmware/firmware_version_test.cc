// Versions compared by what they mean (firmware_version.h): vendor prefixes,
// build dates, leading zeros; raw strings kept for people and the journal.
#include <catch2/catch.hpp>

#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_version.h"

using kiln::firmware::normalise_version;
using kiln::firmware::same_version;
using kiln::firmware::version_matches;

TEST_CASE("vendor forms of one release are the same version") {
    // HPE iLO writes its product before the release.
    CHECK(same_version("iLO 5 v2.70", "2.70", "hpe"));
    CHECK(same_version("iLO 5 v2.70", "iLO 5 v2.70", "hpe"));
    CHECK_FALSE(same_version("iLO 5 v2.70", "2.72", "hpe"));
    CHECK_FALSE(same_version("iLO 5 v2.70", "iLO 6 v2.70", "hpe"));
    // A ROM family label is compared only when both sides have one.
    CHECK(same_version("A43 v2.52 (10/29/2021)", "A43 v2.52", "hpe"));
    CHECK(same_version("A43 v2.52 (10/29/2021)", "2.52", "hpe"));
    CHECK_FALSE(same_version("U30 v2.52", "A43 v2.52", "hpe"));
    // Leading zeros in numeric parts (GPU and iDRAC versions).
    CHECK(same_version("92.00.19.00.11", "92.0.19.0.11", "generic"));
    CHECK(same_version("iDRAC 07.00.00.00", "7.0.0.0", "dell"));
    CHECK_FALSE(same_version("92.00.19.00.11", "92.00.19.00.12", "generic"));
    // Build dates, in parentheses or not.
    CHECK(same_version("2.46 May 11 2021", "2.46", "generic"));
    CHECK(same_version("1.2 2021-05-11", "1.2", "generic"));
    CHECK(same_version("P79 v1.45 (12/06/2017)", "P79 v1.45", "generic"));
    // Letters fold; other text is significant.
    CHECK(same_version("1.44b", "1.44B", "generic"));
    CHECK_FALSE(same_version("1.44B", "1.44", "generic"));
    CHECK_FALSE(same_version("", "1.0", "generic"));
}

TEST_CASE("normalised parts are what the rules say") {
    auto v = normalise_version("iLO 5 v2.70 (Build 7)", "hpe");
    CHECK(v.label == "ilo 5");
    CHECK(v.release == "2.70");
    auto g = normalise_version("  v03.010  ", "generic");
    CHECK(g.label.empty());
    CHECK(g.release == "3.10");
    // Very long strings are compared raw (std::regex recurses per character).
    std::string huge(100000, '1');
    auto h = normalise_version(huge + " v2", "generic");
    CHECK(h.release == huge + " v2");
    CHECK(same_version(huge, huge, "generic"));
}

TEST_CASE("version_matches keeps the build-tag rule besides normalisation") {
    CHECK(version_matches("1.46.0-kiln", "1.46.0"));
    CHECK(version_matches("2.46_b7", "2.46"));
    CHECK(version_matches("iLO 5 v2.70", "2.70", "hpe"));
    CHECK_FALSE(version_matches("2.461", "2.46"));
}
