#include "images/stage/image_config.h"

#include "provisioner/config/toml_reader.h"

namespace kiln::images {

namespace {

ImageProfile read_image(const std::string& name, config::TableReader& r, config::TableScope& scope) {
    ImageProfile p;
    p.name = name;
    p.pos = r.pos();
    if (auto v = r.str("recipe", true)) p.recipe = scope.path(*v);
    if (auto v = r.str("cache")) p.cache = scope.path(*v);
    if (const toml::table* in = r.table("inputs")) {
        for (const auto& [k, v] : *in) {
            if (!v.is_string()) {
                r.ctx().error(v.source(), r.key_path("inputs." + std::string(k.str())),
                              "expected string (a host path)");
                continue;
            }
            p.inputs[std::string(k.str())] = scope.path(*v.value<std::string>());
        }
    }
    return p;
}

}  // namespace

config::ConfigTable image_table() {
    return config::named_profiles_table<ImageProfile>(kImagesTable, kImageNodeKey, read_image);
}

const config::Profiles<ImageProfile>* image_profiles(const config::Fleet& fleet) {
    return fleet.table<config::Profiles<ImageProfile>>(kImagesTable);
}

const ImageProfile* image_profile(const config::Fleet& fleet, const config::Node& node) {
    return fleet.picked<ImageProfile>(kImagesTable, node, kImageNodeKey);
}

void add_image_profile(config::Fleet& fleet, ImageProfile profile) {
    config::add_profile(fleet, kImagesTable, std::move(profile));
}

}  // namespace kiln::images
