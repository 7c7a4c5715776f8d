// Picks the SwitchDriver for a fleet switch by its `os`:
//   sonic  sonic::SonicDriver::from_switch (SSH, key-only; see sonic_driver.h)
//   nvue   nvue::NvueDriver  (https://<address>, port 8765 when not given)
//   eos    eos::EosDriver    (https://<address>, port 443 when not given)
// An `address` written as a full http:// or https:// URL is used as given
// (the emulator, kiln-switch, serves plain HTTP on loopback).
#pragma once

#include <chrono>
#include <memory>

#include "network/nvue/nvue_driver.h"
#include "network/switch_driver.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/core/result.h"
#include "provisioner/net/http_client.h"

namespace kiln::network {

struct SwitchDriverDeps {
    std::shared_ptr<net::HttpClient> http;  // NVUE, EOS; a CurlHttpClient when null
    std::shared_ptr<CommandRunner> local;   // runs ssh for SONiC; a ProcessRunner when null
    std::chrono::milliseconds http_timeout{30000};
    nvue::NvueOptions nvue;
};

// Errors (domain "network"): "network.unknown_os", and each driver's own
// ("credentials", "network.bad_address", SONiC's SSH settings).
Result<std::unique_ptr<SwitchDriver>> make_switch_driver(const config::Fleet& fleet, const config::Switch& sw,
                                                         const SwitchDriverDeps& deps);

}  // namespace kiln::network
