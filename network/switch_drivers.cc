#include "network/switch_drivers.h"

#include <fmt/format.h>

#include "network/eos/eos_driver.h"
#include "network/sonic/sonic_driver.h"
#include "network/switch_endpoint.h"

namespace kiln::network {

Result<std::unique_ptr<SwitchDriver>> make_switch_driver(const config::Fleet& /*fleet*/, const config::Switch& sw,
                                                         const SwitchDriverDeps& deps) {
    if (sw.os == "sonic") {
        auto d = sonic::SonicDriver::from_switch(sw, deps.local);
        if (!d) return d.error();
        return std::unique_ptr<SwitchDriver>(std::move(*d));
    }
    std::shared_ptr<net::HttpClient> http = deps.http ? deps.http : std::make_shared<net::CurlHttpClient>();
    if (sw.os == "nvue") {
        auto ep = endpoint_for(sw, "https", 8765, deps.http_timeout);
        if (!ep) return ep.error();
        return std::unique_ptr<SwitchDriver>(std::make_unique<nvue::NvueDriver>(http, std::move(*ep), deps.nvue));
    }
    if (sw.os == "eos") {
        auto ep = endpoint_for(sw, "https", 443, deps.http_timeout);
        if (!ep) return ep.error();
        return std::unique_ptr<SwitchDriver>(std::make_unique<eos::EosDriver>(http, std::move(*ep)));
    }
    return make_error("network", "network.unknown_os",
                      fmt::format("switch {}: os '{}' has no driver (sonic, nvue, eos)", sw.name, sw.os));
}

}  // namespace kiln::network
