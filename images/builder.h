// Builds a recipe into a disk image, layer by layer (DESIGN §3 image):
//   base   mmdebstrap rootfs (SOURCE_DATE_EPOCH, --variant, the mirror)
//          packed into a fresh qcow2: MBR, one ext4 partition, fstab,
//          extlinux, all through libguestfs
//   layer  a qcow2 overlay on its parent (qemu-img create -b), customised
//          through libguestfs: apt packages, files, commands, kernel
//          arguments, services
//   output the chain flattened by qemu-img convert (optionally compressed)
//          and a manifest beside it
// Each layer is looked up in the LayerCache by key first; only missing keys
// are built. A failing layer leaves the cache untouched and its command's
// output in the error.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "images/build_log.h"
#include "images/guest_disk.h"
#include "images/layer_cache.h"
#include "images/recipe.h"
#include "provisioner/core/command.h"

namespace kiln::images {

struct BuildOptions {
    std::string output;                // "" = <cache>/images/<recipe>.<format>
    std::string apt_dir = "/etc/apt";  // where the machine's apt sources are read
    std::string mbr_path = "/usr/lib/EXTLINUX/mbr.bin";
    std::optional<int64_t> source_date_epoch;  // default: $SOURCE_DATE_EPOCH, else today 00:00 UTC
    std::chrono::seconds command_timeout{3600};
    // (layer, message): one line per step, for progress on stderr.
    std::function<void(const std::string&, const std::string&)> progress;
    // A layer or output another build holds: wait for it (true), or end
    // with image.build_busy naming it (false), for a caller that parks and
    // builds again (cached layers are then found, not rebuilt).
    bool wait_for_others = true;
};

// The lock key an image.build_busy error waits on ("layer <key>" or "output <key>").
inline constexpr const char* kBuildBusy = "image.build_busy";

struct PlannedLayer {
    std::string name;  // "base" or the layer's name
    std::string key;
    std::string parent;  // "" for the base
    bool cached = false;
    int index = -1;  // into Recipe::layers; -1 for the base
};

struct LayerOutcome {
    std::string name;
    std::string key;
    std::string status;  // built | cached
    double seconds = 0;
};

struct BuildResult {
    std::string image;
    std::string manifest_path;
    nlohmann::json manifest;
    std::vector<LayerOutcome> layers;
    bool output_cached = false;
};

class Builder {
public:
    Builder(CommandRunner& runner, GuestDiskFactory& disks, LayerCache& cache)
        : runner_(runner), disks_(disks), cache_(cache) {}

    // The keys of every layer and which are in the cache; builds nothing.
    Result<std::vector<PlannedLayer>> plan(const Recipe& recipe, const BuildOptions& options);
    Result<BuildResult> build(const Recipe& recipe, const BuildOptions& options);

    // Where the output and its manifest go for these options.
    std::string output_path(const Recipe& recipe, const BuildOptions& options) const;
    static std::string manifest_path_for(const std::string& image) { return image + ".manifest.json"; }

private:
    struct Plan;
    Result<Plan> make_plan(const Recipe& recipe, const BuildOptions& options);
    Result<nlohmann::json> build_base(const Recipe& recipe, const Plan& plan, const std::string& staging,
                                      const BuildOptions& options);
    Result<nlohmann::json> build_layer(const Recipe& recipe, const Plan& plan, size_t layer_index,
                                       const std::string& staging, const BuildOptions& options);
    Status apply_layer_steps(ImageTree& tree, const Recipe& recipe, const Plan& plan, const LayerSpec& layer,
                             const std::string& resolver, std::chrono::seconds step_timeout,
                             const BuildOptions& options);
    Result<std::string> host_tree_of(GuestDisk& g, const std::string& key,
                                     const std::function<void(const std::string&)>& say);
    void drop_carried_tree();
    void remove_stale_host_trees();
    Result<CommandResult> run_tool(const std::string& what, const CommandSpec& spec);

    // The host tree a build_in = "host" layer left, for the next one to
    // start from without unpacking its parent again; removed when the
    // build ends.
    struct CarriedTree {
        std::string key;  // the layer it holds ("" while still unpacking)
        std::string dir;
    };
    std::optional<CarriedTree> carried_;

    CommandRunner& runner_;
    GuestDiskFactory& disks_;
    LayerCache& cache_;
    int build_seq_ = 0;
};

// The root filesystem's UUID, fixed by the base key (reproducible builds).
std::string root_uuid_for(const std::string& base_key);

// True when a tool's output says the package mirror failed it (unreachable,
// or caught mid-sync): the engine retries such a build. Exposed for tests.
bool mirror_trouble(const std::string& output);

}  // namespace kiln::images
