// The `image` stage (DESIGN §2, §3): for the node's ImageProfile recipe,
//   observe  the layer keys the recipe gives now, which are cached, and the
//            manifest of the image last written
//   plan     one action "build:<recipe>:<final key>" when the image on disk
//            is not the one the recipe gives; empty when it is
//   apply    build (unchanged layers come from the cache)
//   verify   the manifest names the recipe's final key and the image's
//            bytes hash to the manifest's sha256
// Nodes sharing a recipe share the cache: the per-key lock makes the second
// wait for the first and then find every layer cached.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "images/guest_disk.h"
#include "images/stage/image_config.h"
#include "provisioner/core/command.h"
#include "provisioner/engine/stage.h"

namespace kiln::images {

struct ImageStageOptions {
    // Builds the real thing; tests swap in fakes.
    std::function<std::unique_ptr<CommandRunner>()> make_runner;
    std::function<std::unique_ptr<GuestDiskFactory>()> make_disks;
    std::string apt_dir = "/etc/apt";
};

class ImageStage : public engine::Stage {
public:
    explicit ImageStage(ImageStageOptions options = {});
    std::string name() const override { return "image"; }
    // image_inputs.h, and the recipe's final layer key.
    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override;
    Result<engine::Observation> observe(engine::StageContext& ctx) override;
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override;
    Status apply(engine::StageContext& ctx, const engine::Action& action) override;
    Status verify(engine::StageContext& ctx) override;

private:
    ImageStageOptions options_;
};

// The cache dir of a profile: its `cache` key, else <fleet dir>/.kiln/images.
std::string image_cache_dir(const config::Fleet& fleet, const ImageProfile& profile);

}  // namespace kiln::images
