// kiln's probe guest: the host's own kernel booted directly with a tiny
// initramfs whose /init (probe_init.c, built static as kiln-probe-init)
// prints the readiness marker. It needs no disk image, so it boots in
// seconds even under TCG: the accelerator probe uses it, and so do the
// lifecycle tests.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::vm {

// The newest /boot/vmlinuz-* (or `boot_dir`'s). Errors: "vm.probe".
Result<std::string> find_host_kernel(const std::string& boot_dir = "/boot");

// kiln-probe-init beside the running executable, or $KILN_PROBE_INIT.
Result<std::string> find_probe_init();

// Writes a newc cpio archive holding `init_binary` as /init plus the
// folders it mounts. Errors: "vm.probe".
Status write_probe_initramfs(const std::string& init_binary, const std::string& out_path);

}  // namespace kiln::vm
