// A VM's disk: a qcow2 overlay on the cached guest image, so reimage is a
// new overlay (seconds) and the cache is never written. Built with
// qemu-img through the CommandRunner.
#pragma once

#include <string>

#include "provisioner/core/command.h"
#include "provisioner/core/result.h"

namespace kiln::vm {

// Creates `overlay` backed by `base` (whose format qemu-img reports),
// replacing any overlay already there. Errors: "vm"/"disk".
Status create_overlay(CommandRunner& runner, const std::string& base, const std::string& overlay);

}  // namespace kiln::vm
