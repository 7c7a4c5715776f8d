// Host OS boot through virtual media (DESIGN §3 firmware, "Power and
// boot"): a node's [host_os.NAME] image (an installer ISO) is served by
// kiln's artifact server at a URL ending in "<sha256 prefix>/<file name>",
// inserted in the BMC's virtual CD/DVD drive (VirtualMedia.InsertMedia, or a
// PATCH of the resource where the BMC has no action), the next boot is
// overridden to Cd once, and the host is reset (On when it is off).
//
// What the BMC shows says how far a bring-up got, so a re-run after a kill
// redoes only what is missing:
//   CD holds another image (or none)        -> boot (arm, eject, insert, reset)
//   CD holds ours, Cd/Once override armed   -> boot (the reset never came)
//   CD holds ours, override used up         -> nothing: the host booted it
// The override is armed before the media goes in, so "holds ours, override
// used up" cannot arise from a run killed between the two.
// Ejecting the image on the BMC makes the next run boot the installer again:
// remove `host_os` from a node once its OS is installed.
//
// Errors, domain "firmware":
//   firmware.no_virtual_media  the BMC has no CD/DVD VirtualMedia slot
//   firmware.boot_target       the BMC does not allow BootSourceOverrideTarget Cd
//   firmware.boot              the host did not come up from the override
//   (and firmware.artifact_digest / artifact_io before anything is sent)
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_config.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/engine/stage.h"

namespace kiln::firmware {

// "boot:<name>:<12 hex digits of sha256>".
std::string boot_action_id(const HostOsImage& os);

// The VirtualMedia Image URI is the one kiln serves for `os` (any kiln run:
// the URI ends in ArtifactServer::served_suffix, query and fragment aside).
bool media_is(const std::string& image_uri, const HostOsImage& os);

// The one-time Cd override is set and not yet used by a boot.
bool cd_override_armed(const std::string& target, const std::string& enabled);

// The boot action for the node from the stage's observation (BmcInventory
// to_json with virtual media read), or nullopt when the host booted the
// image already. Errors: firmware.no_virtual_media, firmware.boot_target.
Result<std::optional<engine::Action>> plan_host_os_boot(const config::Node& node, const HostOsImage& os,
                                                        const nlohmann::json& observed);

// The same checks on a fresh inventory (apply re-reads before it acts).
Status check_boot_capable(const config::Node& node, const HostOsImage& os, const BmcInventory& inv);

}  // namespace kiln::firmware
