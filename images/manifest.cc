#include "images/manifest.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace kiln::images {

nlohmann::json first_version(const nlohmann::json& packages, const std::vector<std::string>& names) {
    for (const auto& n : names)
        if (packages.contains(n)) return packages[n];
    return nullptr;
}

nlohmann::json make_manifest(const Recipe& recipe, const std::vector<std::pair<std::string, std::string>>& layer_keys,
                             const nlohmann::json& layer_meta, const std::string& image_sha256, uint64_t image_bytes,
                             int64_t source_date_epoch) {
    const nlohmann::json packages = layer_meta.value("packages", nlohmann::json::object());
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& [name, key] : layer_keys) layers.push_back({{"name", name}, {"key", key}});
    return {
        {"schema", 1},
        {"recipe", recipe.name},
        {"format", recipe.output.format},
        {"compressed", recipe.output.compress},
        {"virtual_size", recipe.output.size_bytes},
        {"layers", layers},
        {"final_key", layer_keys.empty() ? "" : layer_keys.back().second},
        {"kernel", layer_meta.value("kernel", "")},
        {"packages", packages},
        {"dkms_modules", layer_meta.value("dkms_modules", nlohmann::json::array())},
        {"nvidia_driver", first_version(packages, {"nvidia-driver", "nvidia-kernel-dkms", "nvidia-open-kernel-dkms",
                                                   "nvidia-tesla-kernel-dkms"})},
        {"cuda", first_version(packages, {"nvidia-cuda-toolkit", "cuda-toolkit", "libcudart12", "libcudart11.0"})},
        {"nccl", first_version(packages, {"libnccl2", "libnccl-dev"})},
        {"image_sha256", image_sha256},
        {"image_bytes", image_bytes},
        {"source_date_epoch", source_date_epoch},
    };
}

Status write_manifest(const std::string& path, const nlohmann::json& manifest) {
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << manifest.dump(2) << "\n";
        if (!out) return make_error("image", "image.manifest", "cannot write " + tmp);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) return make_error("image", "image.manifest", "cannot write " + path + ": " + ec.message());
    return ok_status();
}

std::optional<nlohmann::json> read_manifest(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

}  // namespace kiln::images
