// An image recipe (TOML, docs/images.md): a Debian base bootstrapped by
// mmdebstrap, ordered layers customised through libguestfs, and the output
// disk. Parsing is complete before anything runs: every problem is reported
// as FILE:LINE:COL: KEY: MESSAGE.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/config/fleet_loader.h"

namespace kiln::images {

// A file placed into the image. Exactly one of source (a host file, relative
// to the recipe), input (a named input the caller may override) or content.
struct FileSpec {
    std::string path;    // absolute path inside the image
    std::string source;  // resolved host path ("" unless given)
    std::string input;   // name in [inputs] ("" unless given)
    std::optional<std::string> content;
    int mode = 0644;
    config::SourcePos pos;
};

// An extra apt repository with its signing key (a host keyring file).
struct RepoSpec {
    std::string name;
    std::string uri;
    std::string suite;
    std::vector<std::string> components;
    std::string key;  // resolved host path of the keyring ("" = trusted=yes, only for file: URIs)
    config::SourcePos pos;
};

struct LayerSpec {
    std::string name;
    std::vector<std::string> packages;    // apt-get install inside the image
    std::vector<std::string> components;  // extra components of the base mirror (contrib, non-free, ...)
    std::vector<RepoSpec> repos;
    std::vector<std::string> debs;  // resolved host paths of local .deb files to install
    std::vector<FileSpec> files;
    std::vector<std::string> commands;     // /bin/sh -c inside the image, in order, after files
    std::vector<std::string> kernel_args;  // appended to the kernel command line
    std::vector<std::string> services;     // systemctl enable
    // Bound on each step inside the appliance (apt-get, a command): the
    // builder's default when unset. Not part of the layer's key: it does
    // not change what the layer contains.
    std::optional<std::chrono::seconds> timeout;
    // Where packages and commands run: inside the libguestfs appliance
    // (default; any build user) or chrooted in the image's tree unpacked on
    // the build host (root only): native speed for DKMS and big apt
    // installs, which crawl under an emulated appliance.
    enum class BuildIn { appliance, host } build_in = BuildIn::appliance;
    config::SourcePos pos;

    bool needs_network() const { return !packages.empty() || !repos.empty() || !debs.empty(); }
    // The spec as canonical JSON (no positions, no host paths: files are
    // named by their digests when keys are computed).
    nlohmann::json canonical() const;
};

struct BaseSpec {
    std::string suite = "bookworm";
    std::string variant = "minbase";
    std::string mirror;  // "" = the machine's apt sources
    std::vector<std::string> components = {"main"};
    std::vector<std::string> packages;  // passed to mmdebstrap --include
    std::vector<std::string> kernel_args = {"console=ttyS0"};
    config::SourcePos pos;
};

struct OutputSpec {
    std::string format = "qcow2";  // qcow2 | raw
    uint64_t size_bytes = 4ull << 30;
    bool compress = false;  // qcow2 only
    config::SourcePos pos;
};

struct InputSpec {
    std::string name;
    std::string path;  // resolved default ("" = the caller must give one)
    config::SourcePos pos;
};

struct Recipe {
    std::string name;
    std::string path;  // as given
    std::string dir;   // relative paths resolve here
    BaseSpec base;
    std::vector<LayerSpec> layers;
    OutputSpec output;
    std::map<std::string, InputSpec> inputs;
};

struct RecipeLoad {
    std::optional<Recipe> recipe;  // set only when errors is empty
    std::vector<config::Diagnostic> errors;
};

// `overrides`: input name -> host path (from --input NAME=PATH); each must
// name an input the recipe declares.
RecipeLoad load_recipe(const std::string& path, const std::map<std::string, std::string>& overrides = {});
RecipeLoad parse_recipe(const std::string& text, const std::string& path,
                        const std::map<std::string, std::string>& overrides = {});

// "4G", "512M", "20GiB", "1073741824" -> bytes.
std::optional<uint64_t> parse_size(const std::string& text);

}  // namespace kiln::images
