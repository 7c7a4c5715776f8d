// [images.NAME]: the table the image stage owns, read by its module rather
// than the core loader (config_table.h). A node picks its guest image with
// `image = "NAME"`.
#pragma once

#include <map>
#include <string>

#include "provisioner/config/config_table.h"
#include "provisioner/config/fleet_config.h"

namespace kiln::images {

struct ImageProfile {
    std::string name;
    std::string recipe;                         // path to an image recipe, resolved against the fleet folder
    std::string cache;                          // layer cache dir; "" = <fleet folder>/.kiln/images
    std::map<std::string, std::string> inputs;  // recipe input name -> host path (resolved)
    config::SourcePos pos;
};

inline constexpr const char* kImagesTable = "images";
inline constexpr const char* kImageNodeKey = "image";

// The table's key, reader and node key, for the stage registry.
config::ConfigTable image_table();

// What the fleet defines, and what this node picks (nullptr: none).
const config::Profiles<ImageProfile>* image_profiles(const config::Fleet& fleet);
const ImageProfile* image_profile(const config::Fleet& fleet, const config::Node& node);
// Adds a profile, for a fleet built in code (tests, benchmarks).
void add_image_profile(config::Fleet& fleet, ImageProfile profile);

}  // namespace kiln::images
