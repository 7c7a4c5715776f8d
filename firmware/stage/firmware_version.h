// Firmware versions as BMCs write them, compared by what they mean: the
// same release reads "iLO 5 v2.70" on an HPE manager and "2.70" in a
// fleet file, "92.00.19.00.11" in one inventory and "92.0.19.0.11" in
// another, "A43 v2.52 (10/29/2021)" with its build date. Rules
// (docs/firmware.md, "Versions"):
//   - a trailing note in parentheses is dropped ("(10/29/2021)", "(Build 7)")
//     and so is a trailing build date ("2.46 May 11 2021");
//   - the text before a " v<digit>" or the vendor's product prefix ("iLO 5 v",
//     "iDRAC ") is a label: compared only when both sides have one, so a
//     profile may write just the release;
//   - numeric dot-separated parts lose leading zeros ("07.00" is "7.0");
//   - letters compare case-insensitively.
// The raw strings stay what kiln shows and journals; only comparisons use
// the normalised form.
#pragma once

#include <string>

namespace kiln::firmware {

struct NormalisedVersion {
    std::string label;    // "ilo 5", "a43", "" when none
    std::string release;  // "2.70", "92.0.19.0.11"
};

// `vendor` is a vendor profile name ("hpe", "dell", "generic", ...).
NormalisedVersion normalise_version(const std::string& raw, const std::string& vendor);

// The reported version is the desired one under the rules above.
bool same_version(const std::string& reported, const std::string& desired, const std::string& vendor);

}  // namespace kiln::firmware
