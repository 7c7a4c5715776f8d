// libFuzzer target: BMC JSON -> kiln's model. The input's first byte picks
// which resource of a small Redfish tree answers with the rest of the input
// (bytes as the BMC sent them); the inventory walk, the typed reads, vendor
// detection and BIOS intent mapping must return a value or an error, never
// crash, hang or leak. Built by bench/redfish/run.sh with clang's
// -fsanitize=fuzzer (the main build uses whatever compiler CMake found).
#include <cstddef>
#include <cstdint>
#include <string>

#include "firmware/redfish/redfish_client.h"
#include "firmware/redfish/redfish_json.h"
#include "firmware/redfish/vendor_profile.h"
#include "firmware/stage/bmc_inventory.h"
#include "tests/firmware/fake_bmc.h"

namespace {

const char* kRoutes[] = {
    "/redfish/v1/",
    "/redfish/v1/Systems",
    "/redfish/v1/Systems/S1",
    "/redfish/v1/Managers",
    "/redfish/v1/Managers/M1",
    "/redfish/v1/UpdateService",
    "/redfish/v1/UpdateService/FirmwareInventory",
    "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);

    // The parser and typed views on their own.
    auto doc = kiln::redfish::parse_json(body, "fuzz");
    if (doc) {
        kiln::redfish::JsonView v(*doc, "fuzz");
        (void)v.members();
        (void)v.link("Systems");
        (void)v.opt_str("Version");
        const auto& profile = kiln::redfish::detect_vendor(*doc, *doc);
        (void)kiln::redfish::map_bios_intents(profile, {{"sriov", true}, {"iommu", false}}, *doc, {});
    }

    // The whole inventory walk with one resource replaced by the input.
    kiln::firmware::test::FakeBmc bmc;
    bmc.minimal_tree();
    const char* route = kRoutes[data[0] % (sizeof kRoutes / sizeof kRoutes[0])];
    bmc.on("GET", route, kiln::firmware::test::Reply{200, body, {}, ""});
    auto session =
        std::make_shared<kiln::redfish::BmcSession>(bmc, kiln::redfish::Endpoint{"http://fuzz.test", "u", "p", {}});
    kiln::redfish::Client client(session, [](std::chrono::milliseconds) { return false; });
    (void)kiln::firmware::read_inventory(client);
    return 0;
}
