// Shared pieces of the firmware tests: a fleet file for one or more BMCs
// written to a scratch folder and loaded the way `kiln` loads it, and a
// node-stage driven through observe/plan/apply/verify as the engine does.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/command.h"
#include "provisioner/engine/cancel.h"
#include "provisioner/engine/stage.h"
#include "tests/support/temp_dir.h"

namespace kiln::firmware::test {

constexpr const char* kBmcPassword = "fw-test-pass-7Q2";  // test data; reaches kiln through the environment

struct FleetSpec {
    std::vector<std::string> bmc_urls;     // one node per URL: node-0, node-1, ...
    std::string firmware_toml;             // [firmware.p] section(s), or ""
    std::string bios_toml;                 // [bios.b] section, or ""
    std::string extra_toml;                // more sections ([host_os.os] is then every node's host_os)
    std::vector<std::string> bmc_systems;  // node i's bmc.system, when given and not ""
};

// Writes fleet.toml (+ pipelines/fw.toml with only the firmware stage) and
// returns the fleet file's path. The password is env:KILN_FW_TEST_PASSWORD,
// which this sets.
std::string write_fleet(const kiln::test::TempDir& dir, const FleetSpec& spec);
config::Fleet load_fleet_or_fail(const std::string& path);

// Runs one node-stage like the engine: observe, plan, apply each action,
// verify. Returns the actions applied, or the first error.
struct StageRunResult {
    std::vector<std::string> actions;
    std::vector<std::string> events;
    std::vector<std::string> progress;
    std::optional<Error> error;
};
StageRunResult run_stage(engine::Stage& stage, const config::Fleet& fleet, const config::Node& node);

// `kiln ARGS...` (build/kiln) as a child with the fleet's password in its
// environment; fails the test when it cannot be started.
kiln::CommandResult run_kiln(std::vector<std::string> args);

// GET `path` of a kiln-bmc at `url` (Basic auth, user admin, kBmcPassword):
// the body of a 200, else fails the test. "/kiln-bmc/state" needs no auth
// and reads the same way.
nlohmann::json bmc_get(const std::string& url, const std::string& path);

// DMTF's rack-mount tree (copied under `dir`) with eight more
// FirmwareInventory members, GPU_SXM_1..8, all named "GPU SXM Firmware";
// the first `at_new` at 92.00.20.00.01, the rest at 92.00.19.00.11.
std::string gpu_tree(const kiln::test::TempDir& dir, int at_new);
// A [firmware.p] table whose one component (`name`, optional `match`
// pattern) wants 92.00.20.00.01, with an image kiln-bmc takes for it.
std::string gpu_component(const kiln::test::TempDir& dir, const std::string& name, const std::string& match);

}  // namespace kiln::firmware::test
