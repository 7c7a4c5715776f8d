// A VM's disk: a qcow2 overlay on the cached guest image, so reimage is a
// new overlay (seconds) and the cache is never written. Built with
// qemu-img through the CommandRunner.
#pragma once

#include <string>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::vm {

// Creates `overlay` backed by `base` (whose format qemu-img reports),
// replacing any overlay already there. Errors: "vm.disk".
Status create_overlay(CommandRunner& runner, const std::string& base, const std::string& overlay);

// What identifies the content of a base image, cheaply: an overlay is only
// valid on the exact base it was created on, so a change here means the
// VM needs a new overlay (reimage), not just a redefine.
// - "sha256:<hex>" from the image build's manifest beside it
//   (<image>.manifest.json, written by the image stage);
// - "file:<bytes>:<mtime ns>" for an image kiln did not build;
// - "" when the file does not exist.
std::string base_image_identity(const std::string& base);

}  // namespace kiln::vm
