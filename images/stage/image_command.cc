#include "images/stage/image_command.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "images/boot_check.h"
#include "images/builder.h"
#include "images/guest_disk.h"
#include "images/layer_cache.h"
#include "images/recipe.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/core/command.h"

namespace kiln::images {

namespace {

std::string cache_dir(const ImageArgs& a) {
    if (!a.cache.empty()) return a.cache;
    if (const char* e = std::getenv("KILN_IMAGE_CACHE"); e && *e) return e;
    return ".kiln/images";
}

// libguestfs hangs under KVM on some hosts; the caller's setting wins.
void default_guestfs_env() {
    ::setenv("LIBGUESTFS_BACKEND", "direct", 0);
}

int fail(const Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.str().c_str());
    return 1;
}

int cmd_build(const ImageArgs& a) {
    std::map<std::string, std::string> overrides;
    for (const auto& in : a.inputs) {
        const auto eq = in.find('=');
        if (eq == std::string::npos || eq == 0) {
            std::fprintf(stderr, "kiln: --input %s: expected NAME=PATH\n", in.c_str());
            return 1;
        }
        overrides[in.substr(0, eq)] = in.substr(eq + 1);
    }
    auto loaded = load_recipe(a.recipe, overrides);
    if (!loaded.recipe) {
        for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.str().c_str());
        return 1;
    }
    default_guestfs_env();
    LayerCache cache(cache_dir(a));
    if (auto st = cache.open(); !st) return fail(st.error());
    ProcessRunner runner;
    GuestfsDiskFactory disks;
    Builder builder(runner, disks, cache);
    BuildOptions opts;
    opts.output = a.output;
    opts.progress = [](const std::string& layer, const std::string& msg) {
        std::fprintf(stderr, "image: [%s] %s\n", layer.c_str(), msg.c_str());
    };
    if (a.plan_only) {
        auto plan = builder.plan(*loaded.recipe, opts);
        if (!plan) return fail(plan.error());
        nlohmann::json layers = nlohmann::json::array();
        for (const auto& l : *plan)
            layers.push_back({{"name", l.name}, {"key", l.key}, {"status", l.cached ? "cached" : "to-build"}});
        std::printf("%s\n", nlohmann::json{{"layers", layers}}.dump(2).c_str());
        return 0;
    }
    auto r = builder.build(*loaded.recipe, opts);
    if (!r) return fail(r.error());
    if (a.json) {
        nlohmann::json layers = nlohmann::json::array();
        for (const auto& l : r->layers) layers.push_back({{"name", l.name}, {"key", l.key}, {"status", l.status}});
        std::printf(
            "%s\n",
            nlohmann::json{{"image", r->image}, {"manifest", r->manifest_path}, {"layers", layers}}.dump(2).c_str());
    } else {
        for (const auto& l : r->layers)
            std::printf("%-16s %s %s\n", l.name.c_str(), l.key.substr(0, 12).c_str(), l.status.c_str());
        std::printf("image    %s\nmanifest %s\n", r->image.c_str(), r->manifest_path.c_str());
    }
    return 0;
}

int cmd_list(const ImageArgs& a) {
    LayerCache cache(cache_dir(a));
    if (auto st = cache.open(); !st) return fail(st.error());
    auto entries = cache.list();
    if (a.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& e : entries)
            out.push_back({{"key", e.key},
                           {"name", e.name},
                           {"parent", e.parent},
                           {"created", e.created},
                           {"last_used", e.last_used},
                           {"size_bytes", e.size_bytes}});
        std::printf("%s\n", nlohmann::json{{"cache", cache.dir()}, {"entries", out}}.dump(2).c_str());
        return 0;
    }
    for (const auto& e : entries)
        std::printf("%s  %-16s parent %-12s %8.1f MiB\n", e.key.substr(0, 12).c_str(), e.name.c_str(),
                    e.parent.empty() ? "-" : e.parent.substr(0, 12).c_str(), e.size_bytes / 1048576.0);
    return 0;
}

int cmd_prune(const ImageArgs& a) {
    std::optional<std::chrono::seconds> age;
    std::optional<uint64_t> size;
    if (!a.max_age.empty()) {
        auto d = config::parse_duration(a.max_age);
        if (!d) {
            std::fprintf(stderr, "kiln: --max-age %s: expected a duration such as 30d\n", a.max_age.c_str());
            return 1;
        }
        age = std::chrono::duration_cast<std::chrono::seconds>(*d);
    }
    if (!a.max_size.empty()) {
        size = parse_size(a.max_size);
        if (!size) {
            std::fprintf(stderr, "kiln: --max-size %s: expected a size such as 50G\n", a.max_size.c_str());
            return 1;
        }
    }
    LayerCache cache(cache_dir(a));
    if (auto st = cache.open(); !st) return fail(st.error());
    auto r = cache.prune(age, size, unix_now());
    if (!r) return fail(r.error());
    if (a.json)
        std::printf(
            "%s\n",
            nlohmann::json{{"removed", r->removed}, {"freed_bytes", r->freed_bytes}, {"kept_bytes", r->kept_bytes}}
                .dump(2)
                .c_str());
    else
        std::printf("removed %zu entries, freed %.1f MiB, kept %.1f MiB\n", r->removed.size(),
                    r->freed_bytes / 1048576.0, r->kept_bytes / 1048576.0);
    return 0;
}

int cmd_boot_check(const ImageArgs& a) {
    ProcessRunner runner;
    BootCheckOptions o;
    o.image = a.image;
    o.format = a.image.size() > 4 && a.image.substr(a.image.size() - 4) == ".raw" ? "raw" : "qcow2";
    o.work_dir = a.image + ".boot-check";
    o.timeout = std::chrono::seconds(a.timeout_s);
    o.accel = a.accel;
    std::fprintf(stderr, "image: boot-check %s (waiting up to %ds for %s)\n", a.image.c_str(), a.timeout_s,
                 "KILN_READY");
    auto r = boot_check(runner, o);
    if (!r) return fail(r.error());
    if (a.json)
        std::printf("%s\n", nlohmann::json{{"accel", r->accel},
                                           {"accel_reason", r->accel_reason},
                                           {"serial_log", r->serial_log},
                                           {"seconds", r->seconds},
                                           {"ready", r->ready}}
                                .dump(2)
                                .c_str());
    else
        std::printf("booted under %s (%s) in %.0fs\n%s\n", r->accel.c_str(), r->accel_reason.c_str(), r->seconds,
                    r->line.c_str());
    return 0;
}

}  // namespace

void add_image_commands(CLI::App& image, ImageArgs& a) {
    image.require_subcommand(1);
    a.build = image.add_subcommand("build", "build RECIPE, taking unchanged layers from the cache");
    a.build->add_option("RECIPE", a.recipe, "image recipe (TOML)")->required();
    a.build->add_option("--cache", a.cache, "layer cache dir (default $KILN_IMAGE_CACHE or .kiln/images)");
    a.build->add_option("--output", a.output, "where the image goes (default <cache>/images/<recipe>.<format>)");
    a.build->add_option("--input", a.inputs, "NAME=PATH: a file input of the recipe (repeatable)");
    a.build->add_flag("--plan", a.plan_only, "print the layer keys and what would be built; build nothing");
    a.build->add_flag("--json", a.json, R"(as {"image", "manifest", "layers": [{"name", "key", "status"}]})");
    a.build->footer(
        "Each layer runs in a libguestfs appliance (LIBGUESTFS_BACKEND_SETTINGS=force_tcg where KVM fails),\n"
        "or, with build_in = \"host\" in the recipe, chrooted in the image's tree on this machine at native\n"
        "speed (root only; gpu-guest.toml builds its nvidia and cuda layers so). See docs/images.md.");
    a.list = image.add_subcommand("list", "the cache's layers");
    a.list->add_option("--cache", a.cache, "layer cache dir");
    a.list->add_flag("--json", a.json, "as JSON");
    a.prune = image.add_subcommand("prune", "remove old layers (and every layer built on them)");
    a.prune->add_option("--cache", a.cache, "layer cache dir");
    a.prune->add_option("--max-age", a.max_age, "remove layers unused for longer than this (30d, 12h)");
    a.prune->add_option("--max-size", a.max_size, "then remove the least recently used until under this (50G)");
    a.prune->add_flag("--json", a.json, "as JSON");
    a.boot_check = image.add_subcommand("boot-check", "boot IMAGE under QEMU and wait for its KILN_READY line");
    a.boot_check->add_option("IMAGE", a.image, "disk image (qcow2, or raw when named *.raw)")->required();
    a.boot_check->add_option("--timeout", a.timeout_s, "seconds to wait for the marker")->capture_default_str();
    a.boot_check->add_option("--accel", a.accel, "auto (probe KVM), kvm or tcg")
        ->check(CLI::IsMember({"auto", "kvm", "tcg"}))
        ->capture_default_str();
    a.boot_check->add_flag("--json", a.json, "as JSON");
}

int cmd_image(const ImageArgs& a) {
    if (a.build && *a.build) return cmd_build(a);
    if (a.list && *a.list) return cmd_list(a);
    if (a.boot_check && *a.boot_check) return cmd_boot_check(a);
    return cmd_prune(a);
}

engine::StageCommandSpec image_command() {
    return engine::args_command<ImageArgs>("image", "build and cache disk images from recipes", add_image_commands,
                                           [](const ImageArgs& a, const engine::CommandEnv&) { return cmd_image(a); });
}

}  // namespace kiln::images
