// libFuzzer target: bytes -> fleet.toml -> kiln's fleet model. Whatever the
// file holds, load_fleet must return a fleet or diagnostics, never crash,
// hang or leak; a loaded fleet's stage inputs (firmware, network, vm) must
// serialise. The
// input is written to a scratch file because the loader reads a path (and
// resolves the pipelines folder beside it); --pipelines is fixed to a
// folder this target writes once, so inputs cannot point the loader at
// arbitrary folders. Built and run by firmware/redfish/fuzz/run_fuzz.sh.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "firmware/stage/firmware_config.h"
#include "firmware/stage/firmware_inputs.h"
#include "images/stage/image_config.h"
#include "network/stage/network_config.h"
#include "network/stage/network_inputs.h"
#include "pipelines/smoke/stage/smoke_config.h"
#include "provisioner/config/fleet_config.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/handover/stage/handover_config.h"
#include "provisioner/vm/stage/vm_config.h"
#include "provisioner/vm/stage/vm_inputs.h"

namespace {

namespace fs = std::filesystem;

struct Scratch {
    fs::path dir;
    fs::path fleet;
    kiln::config::LoadOptions options;
    Scratch() {
        dir = fs::temp_directory_path() / ("kiln-fuzz-fleet-" + std::to_string(getpid()));
        fs::create_directories(dir / "pipes");
        std::ofstream(dir / "pipes" / "gpu.toml") << "schema = 1\nname = \"gpu\"\nstages = [\"firmware\", \"vm\"]\n";
        std::ofstream(dir / "pipes" / "fw.toml") << "schema = 1\nname = \"fw\"\nstages = [\"firmware\"]\n";
        fleet = dir / "fleet.toml";
        options.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
        options.tables = kiln::firmware::firmware_tables();
        options.tables.push_back(kiln::images::image_table());
        options.tables.push_back(kiln::network::network_table());
        options.tables.push_back(kiln::vm::vm_table());
        options.tables.push_back(kiln::smoke::smoke_table());
        options.tables.push_back(kiln::handover::handover_table());
        options.pipelines_dir_override = (dir / "pipes").string();
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static Scratch scratch;
    {
        std::ofstream out(scratch.fleet, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    auto r = kiln::config::load_fleet(scratch.fleet.string(), scratch.options);
    for (const auto& d : r.errors) (void)d.str();
    if (r.fleet)
        for (const auto& node : r.fleet->nodes) {
            (void)kiln::firmware::firmware_inputs(*r.fleet, node).dump();
            (void)kiln::network::network_inputs(*r.fleet, node).dump();
            (void)kiln::vm::vm_inputs(*r.fleet, node).dump();
        }
    return 0;
}
