// `kiln image build RECIPE [--cache DIR] [--output PATH] [--input NAME=PATH]... [--json]`
//   builds the recipe, taking every unchanged layer from the cache; progress
//   per layer on stderr; with --json prints
//   {"image", "manifest", "layers": [{"name", "key", "status": "built"|"cached"}]}.
// `kiln image list [--cache DIR] [--json]`   the cache's entries.
// `kiln image prune [--cache DIR] [--max-age 30d] [--max-size 50G] [--json]`
// `kiln image boot-check IMAGE [--timeout 900] [--accel auto|kvm|tcg] [--json]`
//   boots IMAGE (a snapshot) under QEMU and prints the guest's KILN_READY JSON.
// The cache dir defaults to $KILN_IMAGE_CACHE, else .kiln/images in the
// current folder.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "provisioner/engine/stage_command.h"

namespace kiln::images {

struct ImageArgs {
    std::string recipe;
    std::string cache;
    std::string output;
    std::vector<std::string> inputs;  // NAME=PATH
    std::string max_age;
    std::string max_size;
    bool json = false;
    bool plan_only = false;
    std::string image;
    std::string accel = "auto";
    int timeout_s = 900;
    CLI::App* build = nullptr;
    CLI::App* list = nullptr;
    CLI::App* prune = nullptr;
    CLI::App* boot_check = nullptr;
};

// Fills in `kiln image` (created by the CLI shell) with its subcommands.
void add_image_commands(CLI::App& command, ImageArgs& args);
int cmd_image(const ImageArgs& args);

// `kiln image`, as the images module registers it.
engine::StageCommandSpec image_command();

}  // namespace kiln::images
