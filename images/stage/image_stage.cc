#include "images/stage/image_stage.h"

#include <filesystem>

#include <fmt/format.h>

#include "images/builder.h"
#include "images/layer_cache.h"
#include "images/manifest.h"
#include "images/recipe.h"
#include "images/stage/image_inputs.h"
#include "provisioner/core/sha256.h"

namespace kiln::images {

namespace fs = std::filesystem;

std::string image_cache_dir(const config::Fleet& fleet, const ImageProfile& profile) {
    if (!profile.cache.empty()) return profile.cache;
    return (fs::path(fleet.dir.empty() ? "." : fleet.dir) / ".kiln" / "images").string();
}

namespace {

// A build parked on another's lock looks again this often, or when any
// build of this process ends (a wake on kImageBuiltKey).
constexpr std::chrono::milliseconds kBusyRecheck{5000};
constexpr const char* kImageBuiltKey = "image-build-ended";

struct Loaded {
    const ImageProfile* profile = nullptr;
    Recipe recipe;
};

Result<Loaded> load_for(const engine::StageContext& ctx) {
    const auto& node = ctx.node();
    const ImageProfile* profile = image_profile(ctx.fleet(), node);
    if (!profile)
        return make_error("image", "image.no_profile",
                          fmt::format("node '{}' names no image profile ([images.NAME] and node.image)", node.name));
    auto r = load_recipe(profile->recipe, profile->inputs);
    if (!r.recipe) {
        std::string msg;
        for (const auto& e : r.errors) msg += (msg.empty() ? "" : "; ") + e.str();
        return make_error("image", "image.bad_recipe", msg);
    }
    return Loaded{profile, std::move(*r.recipe)};
}

}  // namespace

ImageStage::ImageStage(ImageStageOptions options) : options_(std::move(options)) {
    if (!options_.make_runner) options_.make_runner = [] { return std::make_unique<ProcessRunner>(); };
    if (!options_.make_disks) options_.make_disks = [] { return std::make_unique<GuestfsDiskFactory>(); };
}

Result<nlohmann::json> ImageStage::inputs(const engine::StageContext& ctx) const {
    nlohmann::json base = image_inputs(ctx.fleet(), ctx.node());
    auto l = load_for(ctx);
    if (!l) return l.error();
    LayerCache cache(image_cache_dir(ctx.fleet(), *l->profile));
    auto runner = options_.make_runner();
    auto disks = options_.make_disks();
    Builder b(*runner, *disks, cache);
    BuildOptions o;
    o.apt_dir = options_.apt_dir;
    auto plan = b.plan(l->recipe, o);
    if (!plan) return plan.error();
    // The final key covers the recipe, every input file and the mirror.
    base["final_key"] = plan->back().key;
    return base;
}

Result<engine::Observation> ImageStage::observe(engine::StageContext& ctx) {
    auto l = load_for(ctx);
    if (!l) return l.error();
    LayerCache cache(image_cache_dir(ctx.fleet(), *l->profile));
    if (auto st = cache.open(); !st) return st.error();
    auto runner = options_.make_runner();
    auto disks = options_.make_disks();
    Builder b(*runner, *disks, cache);
    BuildOptions o;
    o.apt_dir = options_.apt_dir;
    auto plan = b.plan(l->recipe, o);
    if (!plan) return plan.error();
    engine::Observation obs;
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& p : *plan) layers.push_back({{"name", p.name}, {"key", p.key}, {"cached", p.cached}});
    const std::string image = b.output_path(l->recipe, o);
    auto manifest = read_manifest(Builder::manifest_path_for(image));
    std::error_code ec;
    obs.state = {{"recipe", l->recipe.name},
                 {"layers", layers},
                 {"final_key", plan->back().key},
                 {"image", image},
                 {"image_exists", fs::exists(image, ec)},
                 {"manifest_final_key", manifest ? manifest->value("final_key", "") : ""}};
    return obs;
}

Result<std::vector<engine::Action>> ImageStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    const auto& s = observed.state;
    const std::string final_key = s.value("final_key", "");
    if (!ctx.reimage() && s.value("image_exists", false) && s.value("manifest_final_key", "") == final_key)
        return std::vector<engine::Action>{};
    int to_build = 0, cached = 0;
    for (const auto& l : s["layers"]) (l.value("cached", false) ? cached : to_build)++;
    engine::Action a;
    a.id = fmt::format("build:{}:{}", s.value("recipe", ""), final_key.substr(0, 12));
    a.description =
        fmt::format("build image {} ({} layers to build, {} cached)", s.value("recipe", ""), to_build, cached);
    a.detail = {{"final_key", final_key}, {"image", s.value("image", "")}};
    return std::vector<engine::Action>{a};
}

Status ImageStage::apply(engine::StageContext& ctx, const engine::Action&) {
    auto l = load_for(ctx);
    if (!l) return l.error();
    LayerCache cache(image_cache_dir(ctx.fleet(), *l->profile));
    if (auto st = cache.open(); !st) return st.error();
    auto runner = options_.make_runner();
    auto disks = options_.make_disks();
    Builder b(*runner, *disks, cache);
    BuildOptions o;
    o.apt_dir = options_.apt_dir;
    o.progress = [&ctx](const std::string& layer, const std::string& msg) { ctx.progress("[" + layer + "] " + msg); };
    // Nodes sharing an image: one builds each layer, the others park (no
    // thread held through a build of many minutes) and build again when
    // woken, finding the layers cached.
    o.wait_for_others = !ctx.can_park();
    auto r = b.build(l->recipe, o);
    if (!r && r.error().code == kBuildBusy && ctx.can_park())
        return ctx.park_for(kBusyRecheck, nlohmann::json::object(), r.error().message, kImageBuiltKey);
    ctx.wake(kImageBuiltKey);  // nodes parked on a layer or output this build held
    if (!r) return r.error();
    for (const auto& layer : r->layers) ctx.event("image-layer", layer.name + " " + layer.status + " " + layer.key);
    return ok_status();
}

Status ImageStage::verify(engine::StageContext& ctx) {
    auto obs = observe(ctx);
    if (!obs) return obs.error();
    const auto& s = obs->state;
    const std::string image = s.value("image", "");
    auto manifest = read_manifest(Builder::manifest_path_for(image));
    if (!manifest) return make_error("image", "image.verify", "no manifest beside " + image);
    if (manifest->value("final_key", "") != s.value("final_key", ""))
        return make_error(
            "image", "image.verify",
            fmt::format("{} was built from key {}, the recipe now gives {}", image,
                        manifest->value("final_key", "").substr(0, 12), s.value("final_key", "").substr(0, 12)));
    auto digest = sha256_file(image);
    if (!digest) return digest.error();
    if (*digest != manifest->value("image_sha256", ""))
        return make_error("image", "image.verify",
                          fmt::format("{}: sha256 {} differs from its manifest's {}", image, digest->substr(0, 12),
                                      manifest->value("image_sha256", "").substr(0, 12)));
    return ok_status();
}

}  // namespace kiln::images
