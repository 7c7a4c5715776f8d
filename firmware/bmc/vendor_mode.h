// How kiln-bmc serves a tree as one vendor's BMC would (docs/kiln-bmc.md,
// "Vendor modes"): `--vendor dell|hpe|supermicro|lenovo|openbmc|ami`, or
// read from the tree (the service root's Vendor, its Oem keys, the first
// manager's Model / Manufacturer). The emulator's purpose is to fail where
// the hardware would, so each mode takes away what that vendor lacks:
//   dell      updates run as jobs in <manager>/Oem/Dell/Jobs/JID_<n>; one
//             for anything but the BMC waits Scheduled for the next host
//             reset (the task stays Running, Oem.Dell.JobState Scheduled)
//   hpe       versions written in iLO's form: an image's "2.72" on a member
//             that read "iLO 5 v2.70" becomes "iLO 5 v2.72"
//   lenovo    the Bios links no settings object; it is <Bios>/Pending
//   openbmc   SimpleUpdate refused (400 ActionParameterNotSupported, as
//             bmcweb without TFTP); multipart push only
//   ami       no BIOS settings object: PATCH the Bios itself; the settings
//             URI answers 404
//   supermicro, generic: the tree as it is
// Every mode but generic also writes the vendor into the service root's
// Vendor, so clients tell it apart as they would the real one.
#pragma once

#include <optional>
#include <string>

#include "firmware/bmc/mockup_tree.h"

namespace kiln::bmc {

enum class VendorMode { Generic, Dell, Hpe, Supermicro, Lenovo, OpenBmc, Ami };

// "dell" -> Dell; nullopt for a name not listed above.
std::optional<VendorMode> vendor_mode_from_name(const std::string& name);
std::string vendor_mode_name(VendorMode mode);

// The vendor a tree was captured from (Generic when it does not say).
VendorMode infer_vendor_mode(const MockupTree& tree);

// `version` as the vendor writes it where `current` stood. HPE: the
// current's prefix up to " v" kept ("iLO 5 v2.70" + "2.72" -> "iLO 5
// v2.72", "A43 v2.52 (10/29/2021)" + "2.60" -> "A43 v2.60"); others, and a
// version already in that form, as given.
std::string in_vendor_form(VendorMode mode, const std::string& current, const std::string& version);

// Reshapes `tree` (in memory) as `mode` serves it: Vendor in the root;
// Lenovo's settings object moved to <Bios>/Pending; AMI's removed.
void shape_tree(MockupTree& tree, VendorMode mode);

}  // namespace kiln::bmc
