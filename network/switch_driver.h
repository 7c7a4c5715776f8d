// A switch as the network stage drives it, whatever its OS: render the RoCE
// profile for some ports, read the running config of those ports, diff,
// apply, and read back. One implementation per OS:
//   sonic  network/sonic/sonic_driver.h   (config apply-patch over SSH)
//   nvue   network/nvue/nvue_driver.h     (NVUE REST revisions)
//   eos    network/eos/eos_driver.h       (eAPI runCmds)
// make_switch_driver() (network/switch_drivers.h) picks one from the fleet's
// switch `os`.
//
// Configs travel as JSON in the OS's own shape (SONiC: CONFIG_DB tables;
// NVUE: the NVUE object tree; EOS: the driver's structured form), limited to
// what kiln manages: a running config holds only those keys, so a diff never
// reports settings kiln does not own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network/fabric.h"
#include "network/stage/network_config.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"

namespace kiln::network {

// One difference between desired and running config.
struct ConfigChange {
    std::string port;        // front-panel port it concerns; "" = switch-wide
    std::string path;        // OS-shaped location: "PORT|Ethernet0/mtu", "interface/swp1/link/mtu"
    std::string field;       // the leaf, for people: "mtu", "pfc_enable"
    nlohmann::json desired;  // null: kiln wants it absent
    nlohmann::json running;  // null: absent on the switch
    // Applying it takes `port` down and up again (SONiC: its queues, PG
    // buffers, QoS maps, cable length), so plans list such ports.
    bool disruptive = false;
    std::string describe() const;  // "Ethernet0 mtu: 1500 -> 9216"
};

class SwitchDriver {
public:
    virtual ~SwitchDriver() = default;
    virtual std::string os() const = 0;

    // The managed config for these ports (no I/O).
    virtual Result<nlohmann::json> render(const network::RoceProfile& profile,
                                          const std::vector<Port>& ports) const = 0;
    // What the switch runs now for the same keys (I/O, bounded by timeouts):
    // project_running(read_state(), ports).
    Result<nlohmann::json> read_running(const std::vector<Port>& ports);
    // read_running in two halves, so that one read of a switch serves every
    // node cabled to it: the switch's whole state as the OS answers it (one
    // I/O: SONiC's CONFIG_DB dump, NVUE's applied tree, EOS's `show
    // running-config`), and the managed keys of some ports within it (no I/O).
    virtual Result<nlohmann::json> read_state() = 0;
    virtual nlohmann::json project_running(const nlohmann::json& state, const std::vector<Port>& ports) const = 0;
    // The managed config for these ports on this switch as `running` shows
    // it: what depends on the platform (SONiC: the buffer model, the SKU's
    // headroom table) is taken from there. Default: render().
    virtual Result<nlohmann::json> render_for(const network::RoceProfile& profile, const std::vector<Port>& ports,
                                              const nlohmann::json& running) const {
        (void)running;
        return render(profile, ports);
    }
    // What the switch would refuse of the change from `running` to
    // `desired`, found before anything is applied (create-only fields, the
    // NOS's validation of the merged config). Default: nothing.
    virtual Status check(const nlohmann::json& desired, const nlohmann::json& running) const {
        (void)desired;
        (void)running;
        return ok_status();
    }
    // Running vs desired; empty = converged.
    virtual std::vector<ConfigChange> diff(const nlohmann::json& desired, const nlohmann::json& running) const = 0;
    // Make the switch run `desired`. All or nothing: on failure the switch
    // is left at the config it had before (rollback / revision discarded),
    // and the error says so.
    virtual Status apply(const nlohmann::json& desired, const nlohmann::json& running) = 0;
};

}  // namespace kiln::network
