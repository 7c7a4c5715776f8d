// The fleet tables the firmware stage owns, read by its module rather than
// the core loader (config_table.h): [firmware.NAME] components to flash,
// [bios.NAME] BIOS intents, [host_os.NAME] the installer image to boot, and
// [artifact_server], where kiln serves those images for BMCs to pull. A
// node picks its profiles with `firmware`, `bios` and `host_os`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::firmware {

struct FirmwareComponent {
    std::string name;     // inventory name as the BMC reports it, e.g. "BIOS"
    std::string version;  // desired version
    // Which inventory members it applies to besides those named `name`: a
    // glob on their Id or Name ("GPU_SXM_*"), and only members whose
    // RelatedItem links start with `related_item` ("/redfish/v1/Systems/Node1").
    std::string match;
    std::string related_item;
    std::string artifact;  // path, resolved against the fleet file's folder
    std::string sha256;    // lowercase hex, 64 chars
    config::SourcePos pos;
};

struct FirmwareProfile {
    std::string name;
    std::vector<FirmwareComponent> components;
    // When updates take effect (Redfish @Redfish.OperationApplyTime):
    // "Immediate" (the BMC applies at the end of its task) or "OnReset" (the
    // BMC stages the image; the stage resets the host to activate it).
    std::string apply_time = "Immediate";
    config::SourcePos pos;
};

// [host_os.NAME]: the host OS (installer) image the firmware stage boots
// through VirtualMedia.InsertMedia + a one-time Cd boot override + a reset,
// served by kiln's artifact server like firmware artifacts.
struct HostOsImage {
    std::string name;
    std::string image;   // path, resolved against the fleet file's folder
    std::string sha256;  // lowercase hex, 64 chars
    config::SourcePos pos;
};

// BIOS intents in kiln's vocabulary; the firmware stage maps them to vendor
// attribute names. Unset intents are left alone.
struct BiosProfile {
    std::string name;
    std::optional<bool> sriov;
    std::optional<bool> iommu;
    std::optional<bool> acs;
    std::optional<bool> above_4g_decoding;
    std::map<std::string, std::string> extra;  // raw vendor attributes, name -> value
    config::SourcePos pos;
};

// [artifact_server]: where kiln serves firmware images for BMCs to pull
// (UpdateService.SimpleUpdate ImageURI). BMCs must reach `advertise`.
struct ArtifactServerTable {
    std::string listen = "127.0.0.1:0";  // IPv4 HOST:PORT; port 0 = any free port
    std::string advertise;               // base URL BMCs use; "" = http://<listen host>:<bound port>
    config::SourcePos pos;
};

// The tables' keys (also the node keys of the three profile tables).
inline constexpr const char* kFirmwareTable = "firmware";
inline constexpr const char* kBiosTable = "bios";
inline constexpr const char* kHostOsTable = "host_os";
inline constexpr const char* kArtifactServerTable = "artifact_server";

// The four tables with their readers, for the stage registry.
std::vector<config::ConfigTable> firmware_tables();

// What the fleet defines, and what this node picks (nullptr: none).
const config::Profiles<FirmwareProfile>* firmware_profiles(const config::Fleet& fleet);
const config::Profiles<BiosProfile>* bios_profiles(const config::Fleet& fleet);
const config::Profiles<HostOsImage>* host_os_images(const config::Fleet& fleet);
const FirmwareProfile* firmware_profile(const config::Fleet& fleet, const config::Node& node);
const BiosProfile* bios_profile(const config::Fleet& fleet, const config::Node& node);
const HostOsImage* host_os_image(const config::Fleet& fleet, const config::Node& node);
// The fleet's [artifact_server], or nullptr when it has none.
const ArtifactServerTable* artifact_server_table(const config::Fleet& fleet);

}  // namespace kiln::firmware
