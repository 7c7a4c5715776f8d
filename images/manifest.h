// The manifest shipped beside every image: what is inside (packages with
// versions, kernel, NVIDIA driver / CUDA / NCCL versions where present,
// DKMS modules built for the image's kernel), how it was made (layer keys,
// SOURCE_DATE_EPOCH) and the sha256 of the output. Keys sorted, so two
// builds of the same recipe compare with diff.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "images/recipe.h"
#include "provisioner/core/result.h"

namespace kiln::images {

// `layer_meta`: what the last layer recorded (kernel, packages, dkms_modules).
nlohmann::json make_manifest(const Recipe& recipe, const std::vector<std::pair<std::string, std::string>>& layer_keys,
                             const nlohmann::json& layer_meta, const std::string& image_sha256, uint64_t image_bytes,
                             int64_t source_date_epoch);

// The version of the first package of `names` present, or null.
nlohmann::json first_version(const nlohmann::json& packages, const std::vector<std::string>& names);

Status write_manifest(const std::string& path, const nlohmann::json& manifest);
std::optional<nlohmann::json> read_manifest(const std::string& path);

}  // namespace kiln::images
