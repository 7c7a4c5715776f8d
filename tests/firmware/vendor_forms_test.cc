// Issue 14 item 5 (rest): what each vendor profile changes, driven through
// the stage against a scripted BMC of that vendor. Dell: a Scheduled or
// purged update is followed through the iDRAC job queue after the host
// reset, and the job queue is cleared before a BIOS change; HPE: an update
// accepted without a task monitor is judged by the read-back; Lenovo: the
// BIOS settings object is <Bios>/Pending; a BMC with no settings object
// (AMI, Gigabyte) gets the PATCH on the Bios resource itself; OpenBMC:
// multipart push even where SimpleUpdate is advertised. Messages without a
// MessageId are printed by their text.
#include <catch2/catch.hpp>

#include "firmware/redfish/task_monitor.h"
#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/sha256.h"
#include "tests/firmware/fake_bmc.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::firmware;
using namespace kiln::firmware::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

const std::string kSimpleUpdate = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate";
const std::string kReset = "/redfish/v1/Systems/S1/Actions/ComputerSystem.Reset";
const std::string kJob = "/redfish/v1/Managers/M1/Oem/Dell/Jobs/JID_7";

FirmwareStageOptions fast_options() {
    FirmwareStageOptions o;
    o.task_poll = o.settle_poll = milliseconds(5);
    o.settle_timeout = o.task_timeout = milliseconds(3000);
    return o;
}

// minimal_tree() told apart as `vendor` (the service root's Vendor).
void vendor_tree(FakeBmc& bmc, const std::string& vendor) {
    bmc.minimal_tree("1.0", "1.0");
    bmc.on("GET", "/redfish/v1/",
           json_reply({{"@odata.id", "/redfish/v1"},
                       {"Vendor", vendor},
                       {"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                       {"Managers", {{"@odata.id", "/redfish/v1/Managers"}}},
                       {"UpdateService", {{"@odata.id", "/redfish/v1/UpdateService"}}},
                       {"Links", {{"Sessions", {{"@odata.id", "/redfish/v1/SessionService/Sessions"}}}}}}));
}

void bios_at(FakeBmc& bmc, const std::string& version) {
    bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
           json_reply({{"Id", "BIOS"}, {"Name", "System BIOS"}, {"Version", version}}));
}

std::string firmware_toml(const kiln::test::TempDir& dir) {
    std::string path = dir.write("artifacts/bios-2.0.bin", "KILN-FW BIOS 2.0\n");
    return "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"2.0\"\nartifact = \"" + path +
           "\"\nsha256 = \"" + sha256_hex("KILN-FW BIOS 2.0\n") + "\"\n";
}

struct Run {
    kiln::test::TempDir dir;
    config::Fleet fleet;
    StageRunResult result;
};

std::unique_ptr<Run> run_on(const std::shared_ptr<FakeBmc>& bmc, const std::string& firmware,
                            const std::string& bios = "") {
    auto r = std::make_unique<Run>();
    std::string fw = firmware == "bios-2.0" ? firmware_toml(r->dir) : firmware;
    r->fleet = load_fleet_or_fail(
        write_fleet(r->dir, {.bmc_urls = {"http://bmc.test:8000"}, .firmware_toml = fw, .bios_toml = bios}));
    FirmwareStage stage(bmc, fast_options());
    r->result = run_stage(stage, r->fleet, r->fleet.nodes[0]);
    return r;
}

// Index of the first request `method path` in the BMC's log, -1 if none.
long first_index(const FakeBmc& bmc, const std::string& method, const std::string& path) {
    auto reqs = bmc.requests();
    for (size_t i = 0; i < reqs.size(); ++i)
        if (reqs[i].method == method && reqs[i].url.size() >= path.size() &&
            reqs[i].url.compare(reqs[i].url.size() - path.size(), path.size(), path) == 0)
            return static_cast<long>(i);
    return -1;
}

// A Dell BMC whose update task ends Scheduled (job JID_7); the host reset
// runs the job, which ends in `job_end` and, if Completed, flashes the BIOS.
std::shared_ptr<FakeBmc> dell_scheduled(const json& job_end) {
    auto bmc = std::make_shared<FakeBmc>();
    vendor_tree(*bmc, "Dell");
    bmc->on("POST", kSimpleUpdate, json_reply({}, 202, {{"Location", "/redfish/v1/TaskService/Tasks/JID_7"}}));
    bmc->on(
        "GET", "/redfish/v1/TaskService/Tasks/JID_7",
        json_reply({{"TaskState", "Running"}, {"Oem", {{"Dell", {{"Id", "JID_7"}, {"JobState", "Scheduled"}}}}}}, 202));
    bmc->on("GET", kJob, json_reply({{"Id", "JID_7"}, {"JobState", "Scheduled"}, {"PercentComplete", 0}}));
    bmc->on("POST", kReset, Reply{204, "", {}, ""});
    FakeBmc* raw = bmc.get();
    bmc->hook = [raw, job_end](const net::HttpRequest& req, const std::string& path) {
        if (req.method != "POST" || path != kReset) return;
        raw->on("GET", kJob,
                {json_reply({{"Id", "JID_7"}, {"JobState", "Running"}, {"PercentComplete", 40}}), json_reply(job_end)});
        if (job_end["JobState"] == "Completed") bios_at(*raw, "2.0");
    };
    return bmc;
}

}  // namespace

TEST_CASE("a Dell update that ends Scheduled resets the host and completes through the job queue") {
    auto bmc = dell_scheduled({{"Id", "JID_7"},
                               {"JobState", "Completed"},
                               {"PercentComplete", 100},
                               {"Message", "Job completed successfully."},
                               {"MessageId", "PR19"}});
    auto run = run_on(bmc, "bios-2.0");
    INFO((run->result.error ? run->result.error->str() : std::string("ok")));
    REQUIRE_FALSE(run->result.error);
    CHECK(bmc->count("POST", kSimpleUpdate) == 1);
    CHECK(bmc->count("POST", kReset) == 1);
    // The job is read after the reset, to its end.
    long reset = first_index(*bmc, "POST", kReset), job = first_index(*bmc, "GET", kJob);
    REQUIRE(job >= 0);
    CHECK(job > reset);
    CHECK(bmc->count("GET", kJob) >= 2);
}

TEST_CASE("a Dell job that fails after the reset fails the node with the job's message") {
    auto bmc = dell_scheduled({{"Id", "JID_7"},
                               {"JobState", "Failed"},
                               {"PercentComplete", 100},
                               {"Message", "Unable to verify Update Package signature."},
                               {"MessageId", "RED007"}});
    auto run = run_on(bmc, "bios-2.0");
    REQUIRE(run->result.error);
    CHECK(run->result.error->code == "redfish.task_failed");
    CHECK(run->result.error->message.find("JID_7: Failed") != std::string::npos);
    CHECK(run->result.error->message.find("RED007: Unable to verify Update Package signature.") != std::string::npos);
}

TEST_CASE("a Dell task purged after it ran falls back to its job") {
    auto bmc = std::make_shared<FakeBmc>();
    vendor_tree(*bmc, "Dell");
    bmc->on("POST", kSimpleUpdate, json_reply({}, 202, {{"Location", "/redfish/v1/TaskService/Tasks/JID_7"}}));
    bmc->on("GET", "/redfish/v1/TaskService/Tasks/JID_7",
            {json_reply({{"TaskState", "Running"}}, 202), Reply{404, "", {}, ""}});
    SECTION("the job failed: the node fails with its message, no reset") {
        bmc->on("GET", kJob, json_reply({{"JobState", "Failed"}, {"Message", "Firmware update failed."}}));
        auto run = run_on(bmc, "bios-2.0");
        REQUIRE(run->result.error);
        CHECK(run->result.error->message.find("Firmware update failed.") != std::string::npos);
        CHECK(bmc->count("POST", kReset) == 0);
    }
    SECTION("the job completed: the read-back finds the version") {
        bmc->on("GET", kJob, json_reply({{"JobState", "Completed"}, {"Message", "Job completed successfully."}}));
        FakeBmc* raw = bmc.get();
        bmc->hook = [raw](const net::HttpRequest& req, const std::string& path) {
            if (req.method == "POST" && path == kSimpleUpdate) bios_at(*raw, "2.0");
        };
        auto run = run_on(bmc, "bios-2.0");
        INFO((run->result.error ? run->result.error->str() : std::string("ok")));
        REQUIRE_FALSE(run->result.error);
        CHECK(bmc->count("GET", kJob) == 1);
        CHECK(bmc->count("POST", kReset) == 0);
    }
}

TEST_CASE("an update accepted without a task monitor is read back on HPE and refused elsewhere") {
    for (const std::string vendor : {"HPE", "Contoso"}) {
        auto bmc = std::make_shared<FakeBmc>();
        vendor_tree(*bmc, vendor);
        bmc->on("POST", kSimpleUpdate, json_reply({}, 202));
        bios_at(*bmc, "1.0");
        FakeBmc* raw = bmc.get();
        bmc->hook = [raw](const net::HttpRequest& req, const std::string& path) {
            if (req.method == "POST" && path == kSimpleUpdate) bios_at(*raw, "2.0");
        };
        auto run = run_on(bmc, "bios-2.0");
        INFO(vendor << ": " << (run->result.error ? run->result.error->str() : std::string("ok")));
        if (vendor == "HPE") {
            CHECK_FALSE(run->result.error);
        } else {
            REQUIRE(run->result.error);
            CHECK(run->result.error->code == "redfish.missing");
        }
    }
}

namespace {

// A BMC with one BIOS attribute, ProcHyperthreading, and no settings object
// link; `pending_route` (if any) answers as a settings object would. The
// reset applies the change.
std::shared_ptr<FakeBmc> bios_tree(const std::string& vendor, const std::string& pending_route) {
    auto bmc = std::make_shared<FakeBmc>();
    vendor_tree(*bmc, vendor);
    bmc->on("GET", "/redfish/v1/Systems/S1",
            json_reply({{"@odata.id", "/redfish/v1/Systems/S1"},
                        {"BiosVersion", "1.0"},
                        {"PowerState", "On"},
                        {"Bios", {{"@odata.id", "/redfish/v1/Systems/S1/Bios"}}},
                        {"Actions",
                         {{"#ComputerSystem.Reset",
                           {{"target", kReset}, {"ResetType@Redfish.AllowableValues", {"On", "ForceRestart"}}}}}}}));
    auto attrs = [](const std::string& v) {
        return json_reply({{"@odata.id", "/redfish/v1/Systems/S1/Bios"}, {"Attributes", {{"ProcHyperthreading", v}}}});
    };
    bmc->on("GET", "/redfish/v1/Systems/S1/Bios", attrs("Enabled"));
    if (!pending_route.empty()) bmc->on("GET", pending_route, json_reply({{"Attributes", json::object()}}));
    bmc->on("POST", kReset, Reply{204, "", {}, ""});
    bmc->on("POST", "/redfish/v1/Managers/M1/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue",
            Reply{200, "{}", {}, ""});
    FakeBmc* raw = bmc.get();
    bmc->hook = [raw, attrs](const net::HttpRequest& req, const std::string& path) {
        if (req.method == "POST" && path == kReset) raw->on("GET", "/redfish/v1/Systems/S1/Bios", attrs("Disabled"));
    };
    for (const char* p : {"/redfish/v1/Systems/S1/Bios", "/redfish/v1/Systems/S1/Bios/Pending"})
        bmc->on("PATCH", p, Reply{204, "", {}, ""});  // where it went is checked through the request log
    return bmc;
}

const std::string kBiosProfile = "[bios.b]\nattributes = { ProcHyperthreading = \"Disabled\" }\n";

std::vector<std::string> patched(const FakeBmc& bmc) {
    std::vector<std::string> out;
    for (const auto& r : bmc.requests())
        if (r.method == "PATCH") out.push_back(r.url.substr(r.url.find("/redfish")));
    return out;
}

}  // namespace

TEST_CASE("BIOS settings go where the vendor keeps its settings object") {
    SECTION("Lenovo: <Bios>/Pending, though the Bios resource links none") {
        auto bmc = bios_tree("Lenovo", "/redfish/v1/Systems/S1/Bios/Pending");
        auto run = run_on(bmc, "", kBiosProfile);
        INFO((run->result.error ? run->result.error->str() : std::string("ok")));
        REQUIRE_FALSE(run->result.error);
        CHECK(patched(*bmc) == std::vector<std::string>{"/redfish/v1/Systems/S1/Bios/Pending"});
    }
    SECTION("AMI / Gigabyte: no settings object, the Bios resource itself, then a reset") {
        auto bmc = bios_tree("AMI", "");
        auto run = run_on(bmc, "", kBiosProfile);
        INFO((run->result.error ? run->result.error->str() : std::string("ok")));
        REQUIRE_FALSE(run->result.error);
        CHECK(patched(*bmc) == std::vector<std::string>{"/redfish/v1/Systems/S1/Bios"});
        CHECK(bmc->count("POST", kReset) == 1);
    }
    SECTION("Dell: the job queue is cleared before the change, other vendors leave it") {
        const std::string clear =
            "/redfish/v1/Managers/M1/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue";
        auto dell = bios_tree("Dell", "");
        auto run = run_on(dell, "", kBiosProfile);
        REQUIRE_FALSE(run->result.error);
        REQUIRE(dell->count("POST", clear) == 1);
        CHECK(first_index(*dell, "POST", clear) < first_index(*dell, "PATCH", "/redfish/v1/Systems/S1/Bios"));
        auto other = bios_tree("AMI", "");
        REQUIRE_FALSE(run_on(other, "", kBiosProfile)->result.error);
        CHECK(other->count("POST", clear) == 0);
    }
}

TEST_CASE("OpenBMC gets a multipart push even where SimpleUpdate is advertised") {
    auto bmc = std::make_shared<FakeBmc>();
    vendor_tree(*bmc, "OpenBMC");
    bmc->on("GET", "/redfish/v1/UpdateService",
            json_reply({{"FirmwareInventory", {{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory"}}},
                        {"MultipartHttpPushUri", "/redfish/v1/UpdateService/update"},
                        {"Actions", {{"#UpdateService.SimpleUpdate", {{"target", kSimpleUpdate}}}}}}));
    bmc->on("POST", "/redfish/v1/UpdateService/update", Reply{204, "", {}, ""});
    FakeBmc* raw = bmc.get();
    bmc->hook = [raw](const net::HttpRequest& req, const std::string& path) {
        if (req.method == "POST" && path == "/redfish/v1/UpdateService/update") bios_at(*raw, "2.0");
    };
    auto run = run_on(bmc, "bios-2.0");
    INFO((run->result.error ? run->result.error->str() : std::string("ok")));
    REQUIRE_FALSE(run->result.error);
    CHECK(bmc->count("POST", "/redfish/v1/UpdateService/update") == 1);
    CHECK(bmc->count("POST", kSimpleUpdate) == 0);
}

TEST_CASE("messages without a MessageId are printed by their text") {
    redfish::Response r;
    r.status = 400;
    r.method = "PATCH";
    r.uri = "/redfish/v1/Systems/S1/Bios";
    r.body = {{"error",
               {{"@Message.ExtendedInfo",
                 {{{"Message", "The attribute is read-only."}}, {{"MessageId", "Base.1.8.PropertyNotWritable"}}}}}}};
    auto e = redfish::status_error(r);
    CHECK(e.message ==
          "PATCH /redfish/v1/Systems/S1/Bios: HTTP 400 (\"The attribute is read-only.\", "
          "Base.1.8.PropertyNotWritable)");
}

TEST_CASE("iDRAC job states and job ids") {
    using redfish::job_phase;
    using redfish::JobPhase;
    CHECK(job_phase("COMPLETED") == JobPhase::Completed);
    CHECK(job_phase("CompletedWithErrors") == JobPhase::Failed);
    CHECK(job_phase("Failed") == JobPhase::Failed);
    CHECK(job_phase("Scheduled") == JobPhase::Waiting);
    CHECK(job_phase("Downloading") == JobPhase::Waiting);
    redfish::TaskResult t;
    t.monitor = "/redfish/v1/TaskService/Tasks/JID_123";
    CHECK(redfish::dell_job_id(t) == "JID_123");
    t.monitor = "/redfish/v1/TaskService/Tasks/5";
    CHECK(redfish::dell_job_id(t).empty());
    t.final_body = {{"Oem", {{"Dell", {{"Id", "JID_9"}}}}}};
    CHECK(redfish::dell_job_id(t) == "JID_9");
}
