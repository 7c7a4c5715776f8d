// Which SmokeTransport the shipped kiln uses. Real VMs by default (the QEMU
// guest agent over KILN_LIBVIRT_URI, default qemu:///system);
// KILN_SMOKE_TRANSPORT=local rehearses on this host instead: kiln-smoke
// processes (KILN_SMOKE_BINARY, default kiln-smoke beside the kiln binary),
// KILN_SMOKE_LOCAL_VMS ranks per node (default 2) on loopback ports from
// KILN_SMOKE_PORT_BASE (default 29600).
#pragma once

#include <memory>

#include "pipelines/smoke/stage/smoke_transport.h"

namespace kiln::smoke {

std::shared_ptr<SmokeTransport> default_transport();

}  // namespace kiln::smoke
