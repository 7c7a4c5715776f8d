// Issue 14 item 5 (part): the protocol forms real BMCs use besides the
// inline DMTF ones. Task states in any case, Dell's Scheduled (as TaskState
// or as the job state of a Running task), a task purged while it ran, and
// allowable values given through @Redfish.ActionInfo.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "firmware/redfish/task_monitor.h"
#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_stage.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/fake_bmc.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::redfish;
using namespace kiln::firmware::test;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::mockup_path;
using nlohmann::json;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

Endpoint endpoint() {
    return Endpoint{"http://bmc.test:8000", "admin", "s3cret-pw", {}};
}

Response accepted(const std::string& monitor) {
    Response r;
    r.status = 202;
    r.method = "POST";
    r.uri = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate";
    r.headers = {{"Location", monitor}};
    return r;
}

Client client_of(FakeBmc& bmc) {
    return Client(std::make_shared<BmcSession>(bmc, endpoint()), [](milliseconds) { return true; });
}

}  // namespace

TEST_CASE("task states compare case-insensitively and Dell's Scheduled is a staged success") {
    CHECK(task_phase("COMPLETED", "ok") == TaskPhase::Succeeded);
    CHECK(task_phase("completed", "Critical") == TaskPhase::Failed);
    CHECK(task_phase("running", "") == TaskPhase::Running);
    CHECK(task_phase("Scheduled", "") == TaskPhase::Succeeded);
    CHECK(task_phase("Exception", "") == TaskPhase::Failed);
}

TEST_CASE(
    "a Dell update task that ends Scheduled, or runs with its job Scheduled, is followed to that and no further") {
    FakeBmc bmc;
    bmc.minimal_tree();
    auto c = client_of(bmc);
    SECTION("TaskState Scheduled") {
        bmc.on("GET", "/redfish/v1/TaskService/Tasks/JID_1",
               {json_reply({{"TaskState", "Running"}}, 202),
                json_reply({{"TaskState", "Scheduled"}, {"TaskStatus", "OK"}})});
        auto r = follow_task(c, accepted("/redfish/v1/TaskService/Tasks/JID_1"));
        REQUIRE(r);
        CHECK(r->state == "Scheduled");
    }
    SECTION("Running with Oem.Dell.JobState Scheduled") {
        bmc.on("GET", "/redfish/v1/TaskService/Tasks/JID_2",
               json_reply({{"TaskState", "Running"}, {"Oem", {{"Dell", {{"JobState", "Scheduled"}}}}}}, 202));
        auto r = follow_task(c, accepted("/redfish/v1/TaskService/Tasks/JID_2"));
        REQUIRE(r);
        CHECK(r->state == "Scheduled");
        CHECK(r->polls == 1);  // not polled until the deadline
    }
}

TEST_CASE("a task purged while it ran ends as Purged for the caller's read-back to judge") {
    FakeBmc bmc;
    bmc.minimal_tree();
    auto c = client_of(bmc);
    bmc.on("GET", "/redfish/v1/TaskService/Tasks/JID_3",
           {json_reply({{"TaskState", "Running"}}, 202), Reply{404, "", {}, ""}});
    auto r = follow_task(c, accepted("/redfish/v1/TaskService/Tasks/JID_3"));
    REQUIRE(r);
    CHECK(r->state == "Purged");
    // A monitor that was never seen running and answers 404 is still an error.
    bmc.on("GET", "/redfish/v1/TaskService/Tasks/JID_4", Reply{404, "", {}, ""});
    CHECK_FALSE(follow_task(c, accepted("/redfish/v1/TaskService/Tasks/JID_4")));
}

TEST_CASE("allowable reset types and transfer protocols are read from @Redfish.ActionInfo") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on("GET", "/redfish/v1/Systems/S1",
           json_reply({{"BiosVersion", "1.0"},
                       {"PowerState", "On"},
                       {"Actions",
                        {{"#ComputerSystem.Reset",
                          {{"target", "/redfish/v1/Systems/S1/Actions/ComputerSystem.Reset"},
                           {"@Redfish.ActionInfo", "/redfish/v1/Systems/S1/ResetActionInfo"}}}}}}));
    bmc.on("GET", "/redfish/v1/Systems/S1/ResetActionInfo",
           json_reply({{"Parameters", {{{"Name", "ResetType"}, {"AllowableValues", {"On", "ForceOff"}}}}}}));
    bmc.on("GET", "/redfish/v1/UpdateService",
           json_reply({{"Actions",
                        {{"#UpdateService.SimpleUpdate",
                          {{"target", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"},
                           {"@Redfish.ActionInfo", "/redfish/v1/UpdateService/SimpleUpdateActionInfo"}}}}}}));
    bmc.on("GET", "/redfish/v1/UpdateService/SimpleUpdateActionInfo",
           json_reply(
               {{"Parameters",
                 {{{"Name", "ImageURI"}}, {{"Name", "TransferProtocol"}, {"AllowableValues", {"HTTPS", "SFTP"}}}}}}));
    auto c = client_of(bmc);
    auto inv = kiln::firmware::read_inventory(c);
    REQUIRE(inv);
    CHECK(inv->reset_types == std::vector<std::string>{"On", "ForceOff"});
    CHECK(inv->transfer_protocols == std::vector<std::string>{"HTTPS", "SFTP"});
    CHECK(inv->warnings.empty());

    // An ActionInfo that cannot be read: a warning, the inventory stands.
    bmc.on("GET", "/redfish/v1/Systems/S1/ResetActionInfo", Reply{404, "", {}, ""});
    auto partial = kiln::firmware::read_inventory(c);
    REQUIRE(partial);
    CHECK(partial->reset_types.empty());
    REQUIRE(partial->warnings.size() == 1);
    CHECK(partial->warnings[0].part == "action_info");
}

// kiln-bmc refuses a reset type its ActionInfo does not allow (HTTP 400), as
// a real BMC does: the stage must restart the host with what is allowed.
TEST_CASE("a BIOS change on a BMC whose ActionInfo allows only On and ForceOff restarts the host by off then on") {
    kiln::test::TempDir dir;
    const std::string tree = dir.file("tree");
    fs::copy(mockup_path("dmtf-public-rackmount1"), tree, fs::copy_options::recursive);
    const std::string sys = tree + "/Systems/437XR1138R2";
    json system = json::parse(std::ifstream(sys + "/index.json"));
    auto& reset = system["Actions"]["#ComputerSystem.Reset"];
    reset.erase("ResetType@Redfish.AllowableValues");
    reset["@Redfish.ActionInfo"] = "/redfish/v1/Systems/437XR1138R2/ResetActionInfo";
    std::ofstream(sys + "/index.json") << system.dump(2);
    fs::create_directories(sys + "/ResetActionInfo");
    std::ofstream(sys + "/ResetActionInfo/index.json") << json{
        {"@odata.id", "/redfish/v1/Systems/437XR1138R2/ResetActionInfo"},
        {"@odata.type", "#ActionInfo.v1_1_2.ActionInfo"},
        {"Id", "ResetActionInfo"},
        {"Name", "Reset Action Info"},
        {"Parameters",
         {{{"Name", "ResetType"},
           {"Required", true},
           {"DataType", "String"},
           {"AllowableValues", {"On", "ForceOff"}}}}}}.dump(2);

    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", tree, "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    auto fleet = load_fleet_or_fail(write_fleet(
        dir, {.bmc_urls = {bmc.url()}, .bios_toml = "[bios.b]\nattributes = { ProcHyperthreading = \"Disabled\" }\n"}));
    kiln::firmware::FirmwareStageOptions o;
    o.task_poll = o.settle_poll = milliseconds(20);
    o.settle_timeout = o.task_timeout = milliseconds(5000);
    kiln::firmware::FirmwareStage stage(nullptr, o);
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    REQUIRE(run.actions.size() == 1);
    bool off = false, on = false;
    for (const auto& p : run.progress) {
        off |= p == "resetting the host (ForceOff)";
        on |= p == "resetting the host (On)";
        CHECK(p != "resetting the host (ForceRestart)");
    }
    CHECK(off);
    CHECK(on);
}
