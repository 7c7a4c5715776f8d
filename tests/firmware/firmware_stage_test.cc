// The firmware stage: BIOS settings converged on kiln-bmc (HPE tree),
// firmware updates through kiln's artifact server against a scripted BMC
// (kiln-bmc's SimpleUpdate had not landed when these were written), crash
// safety, and secrets kept out of the journal, events and errors.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/sha256.h"
#include "provisioner/engine/engine.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/fake_bmc.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::firmware;
using namespace kiln::firmware::test;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::mockup_path;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

FirmwareStageOptions fast_options() {
    FirmwareStageOptions o;
    o.task_poll = milliseconds(20);
    o.settle_poll = milliseconds(20);
    o.settle_timeout = milliseconds(5000);
    o.task_timeout = milliseconds(5000);
    return o;
}

void start(BmcChild& bmc, const std::string& mockup) {
    REQUIRE(bmc.start({"--mockup", mockup_path(mockup), "--port", "0"}, {{"KILN_BMC_PASSWORD", kBmcPassword}}));
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A scripted BMC whose BIOS goes to `to` once SimpleUpdate fetched the
// image from kiln's artifact server with the right digest.
struct UpdatingBmc {
    FakeBmc bmc;
    std::string fetched_sha;
    int fetches = 0;
    explicit UpdatingBmc(const std::string& to) {
        bmc.minimal_tree("1.0", "1.0");
        bmc.on("GET", "/redfish/v1/TaskService/Tasks/5",
               {json_reply({{"TaskState", "Running"}, {"PercentComplete", 50}}, 202),
                json_reply({{"TaskState", "Completed"}, {"TaskStatus", "OK"}})});
        bmc.hook = [this, to](const net::HttpRequest& req, const std::string& path) {
            if (req.method != "POST" || path != "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate") return;
            auto body = json::parse(req.body);
            net::CurlHttpClient http;
            net::HttpRequest get;
            get.url = body["ImageURI"].get<std::string>();
            auto img = http.send(get);
            if (!img || img->status != 200) return;
            ++fetches;
            fetched_sha = sha256_hex(img->body);
            bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
                   json_reply({{"Id", "BIOS"}, {"Name", "System BIOS"}, {"Version", to}}));
            bmc.on("POST", path, json_reply({}, 202, {{"Location", "/redfish/v1/TaskService/Tasks/5"}}));
        };
        bmc.on("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
               json_reply({}, 202, {{"Location", "/redfish/v1/TaskService/Tasks/5"}}));
    }
};

std::string firmware_toml(const kiln::test::TempDir& dir, const std::string& content, const std::string& sha = "") {
    std::string path = dir.write("artifacts/bios-2.0.bin", content);
    return "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"2.0\"\nartifact = \"" + path +
           "\"\nsha256 = \"" + (sha.empty() ? sha256_hex(content) : sha) + "\"\n";
}

}  // namespace

TEST_CASE("the stage converges HPE BIOS intents on kiln-bmc through the settings object and a reset") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");
    kiln::test::TempDir dir;
    auto path = write_fleet(dir, {.bmc_urls = {bmc.url()},
                                  .bios_toml = "[bios.b]\nsriov = false\niommu = true\nacs = false\n"});
    auto fleet = load_fleet_or_fail(path);
    FirmwareStage stage(nullptr, fast_options());

    auto first = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((first.error ? first.error->str() : std::string("ok")));
    REQUIRE_FALSE(first.error);
    REQUIRE(first.actions.size() == 1);
    CHECK(first.actions[0].rfind("bios:", 0) == 0);
    bool noted_acs = false;
    for (const auto& e : first.events) noted_acs |= e.find("acs:") != std::string::npos;
    CHECK(noted_acs);

    // Read back by an independent client: the value is current, nothing pending.
    net::CurlHttpClient http;
    net::HttpRequest get;
    get.url = bmc.url() + "/redfish/v1/systems/1/bios";
    get.basic_user = "admin";
    get.basic_password = kBmcPassword;
    auto r = http.send(get);
    REQUIRE(r);
    CHECK(json::parse(r->body)["Attributes"]["Sriov"] == "Disabled");

    auto second = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE_FALSE(second.error);
    CHECK(second.actions.empty());
}

TEST_CASE("an unknown raw BIOS attribute is refused at plan time naming the fleet position") {
    BmcChild bmc;
    start(bmc, "dmtf-public-rackmount1");
    kiln::test::TempDir dir;
    auto path = write_fleet(dir, {.bmc_urls = {bmc.url()}, .bios_toml = "[bios.b]\nattributes = { ProcTurbo = \"Enabled\" }\n"});
    auto fleet = load_fleet_or_fail(path);
    FirmwareStage stage(nullptr, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE(run.error);
    CHECK(run.error->code == "firmware.bios_attribute");
    CHECK(run.error->message.find("fleet.toml:") != std::string::npos);
    CHECK(run.error->message.find("bios.b.attributes.ProcTurbo") != std::string::npos);
}

TEST_CASE("a firmware update is served from kiln's artifact server followed to the end and never repeated") {
    kiln::test::TempDir dir;
    const std::string image = "BIOS IMAGE 2.0 " + std::string(100000, 'x');
    auto http = std::make_shared<UpdatingBmc>("2.0");
    auto path = write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .firmware_toml = firmware_toml(dir, image)});
    auto fleet = load_fleet_or_fail(path);
    std::shared_ptr<net::HttpClient> transport(http, &http->bmc);
    FirmwareStage stage(transport, fast_options());

    auto first = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((first.error ? first.error->str() : std::string("ok")));
    REQUIRE_FALSE(first.error);
    CHECK(first.actions == std::vector<std::string>{"flash:BIOS:2.0"});
    CHECK(http->fetches == 1);
    CHECK(http->fetched_sha == sha256_hex(image));
    const int posts = http->bmc.count("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate");
    CHECK(posts == 1);
    for (const auto& req : http->bmc.requests())
        if (req.method == "POST" && req.url.find("SimpleUpdate") != std::string::npos) {
            auto body = json::parse(req.body);
            CHECK(body["Targets"] == json::array({"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}));
            CHECK(body["TransferProtocol"] == "HTTP");
            CHECK(body["ImageURI"].get<std::string>().find("/artifacts/") != std::string::npos);
        }

    // Re-run (as after kill -9 once the flash landed): observed first, nothing to do.
    auto second = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE_FALSE(second.error);
    CHECK(second.actions.empty());
    // An apply of the stale action (a plan made before the flash) flashes nothing either.
    engine::StopToken stop;
    engine::StageContext ctx(fleet, fleet.nodes[0], "firmware", stop,
                             engine::StageContext::Clock::now() + std::chrono::minutes(1), nullptr, nullptr);
    engine::Action stale{"flash:BIOS:2.0", "", {{"component", "BIOS"}}};
    REQUIRE(stage.apply(ctx, stale));
    CHECK(http->bmc.count("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate") == posts);
}

TEST_CASE("an update task still running from a killed run is waited for not started again") {
    kiln::test::TempDir dir;
    FakeBmc bmc;
    bmc.minimal_tree("1.0", "1.0");
    bmc.on("GET", "/redfish/v1/",
           json_reply({{"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                       {"Managers", {{"@odata.id", "/redfish/v1/Managers"}}},
                       {"UpdateService", {{"@odata.id", "/redfish/v1/UpdateService"}}},
                       {"Tasks", {{"@odata.id", "/redfish/v1/TaskService"}}},
                       {"Links", {{"Sessions", {{"@odata.id", "/redfish/v1/SessionService/Sessions"}}}}}}));
    bmc.on("GET", "/redfish/v1/TaskService", json_reply({{"Tasks", {{"@odata.id", "/redfish/v1/TaskService/Tasks"}}}}));
    bmc.on("GET", "/redfish/v1/TaskService/Tasks",
           json_reply({{"Members", {{{"@odata.id", "/redfish/v1/TaskService/Tasks/9"}}}}}));
    bmc.on("GET", "/redfish/v1/TaskService/Tasks/9",
           {json_reply({{"TaskState", "Running"}}), json_reply({{"TaskState", "Running"}}),
            json_reply({{"TaskState", "Completed"}, {"TaskStatus", "OK"}})});
    bmc.hook = [&bmc](const net::HttpRequest& req, const std::string& path) {
        static int polls = 0;
        if (req.method == "GET" && path == "/redfish/v1/TaskService/Tasks/9" && ++polls == 3)
            bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
                   json_reply({{"Id", "BIOS"}, {"Name", "System BIOS"}, {"Version", "2.0"}}));
    };
    auto path = write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .firmware_toml = firmware_toml(dir, "img")});
    auto fleet = load_fleet_or_fail(path);
    std::shared_ptr<net::HttpClient> transport(std::shared_ptr<void>(), &bmc);
    FirmwareStage stage(transport, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    CHECK(run.actions == std::vector<std::string>{"flash:BIOS:2.0"});
    CHECK(bmc.count("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate") == 0);
}

TEST_CASE("an artifact whose digest differs from the fleet's is neither served nor flashed") {
    kiln::test::TempDir dir;
    auto http = std::make_shared<UpdatingBmc>("2.0");
    auto path = write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"},
                                  .firmware_toml = firmware_toml(dir, "tampered", std::string(64, 'a'))});
    auto fleet = load_fleet_or_fail(path);
    std::shared_ptr<net::HttpClient> transport(http, &http->bmc);
    FirmwareStage stage(transport, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE(run.error);
    CHECK(run.error->code == "firmware.artifact_digest");
    CHECK(http->bmc.count("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate") == 0);
    CHECK(http->fetches == 0);
}

TEST_CASE("a failed update task fails the action with the task's messages") {
    kiln::test::TempDir dir;
    auto http = std::make_shared<UpdatingBmc>("1.0");
    http->bmc.on("GET", "/redfish/v1/TaskService/Tasks/5",
                 json_reply({{"TaskState", "Exception"},
                             {"TaskStatus", "Critical"},
                             {"Messages", {{{"MessageId", "Update.1.0.ApplyFailed"}}}}}));
    auto path = write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .firmware_toml = firmware_toml(dir, "img")});
    auto fleet = load_fleet_or_fail(path);
    std::shared_ptr<net::HttpClient> transport(http, &http->bmc);
    FirmwareStage stage(transport, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE(run.error);
    CHECK(run.error->code == "redfish.task_failed");
    CHECK(run.error->message.find("Update.1.0.ApplyFailed") != std::string::npos);
}

namespace {

// Wraps the real transport and remembers every session token it carried.
class RecordingHttp : public net::HttpClient {
public:
    Result<net::HttpResponse> send(const net::HttpRequest& request) override {
        auto r = inner_.send(request);
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [k, v] : request.headers)
            if (k == "X-Auth-Token") tokens.insert(v);
        if (r)
            for (const auto& [k, v] : r->headers)
                if (k == "X-Auth-Token" || k == "x-auth-token") tokens.insert(v);
        return r;
    }
    std::set<std::string> tokens;

private:
    net::CurlHttpClient inner_;
    std::mutex mu_;
};

struct CollectingSink : engine::EventSink {
    void on_event(const engine::EngineEvent& e) override {
        std::lock_guard<std::mutex> lock(mu);
        text += e.node + " " + e.stage + " " + e.message + " " + e.outcome + "\n";
    }
    std::mutex mu;
    std::string text;
};

}  // namespace

TEST_CASE("after a firmware apply no password or session token is in the journal events or errors") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");
    kiln::test::TempDir dir;
    // node-0 converges; node-1 points at a BMC path that fails (no such
    // system tree), so error messages are produced and checked too.
    auto path = write_fleet(dir, {.bmc_urls = {bmc.url(), bmc.url() + "/broken"},
                                  .bios_toml = "[bios.b]\nsriov = false\n"});
    auto fleet = load_fleet_or_fail(path);
    fleet.nodes[1].bmc.username = "nobody";  // refused login: an error path
    auto http = std::make_shared<RecordingHttp>();
    engine::StageRegistry registry;
    registry.add(std::make_shared<FirmwareStage>(http, fast_options()));
    std::string journal = dir.file("journal.db");
    {
        auto store = journal::open_sqlite_store(journal, {});
        REQUIRE(store);
        CollectingSink sink;
        engine::StopToken stop;
        engine::Engine eng(fleet, registry, store->get(), &sink, stop);
        auto report = eng.run({});
        REQUIRE(report);
        std::string all = sink.text;
        for (const auto& n : report->nodes) all += n.node + " " + n.state + " " + n.error + "\n";
        CHECK(all.find("nobody") != std::string::npos);  // the error path really ran
        CHECK(all.find(kBmcPassword) == std::string::npos);
        REQUIRE_FALSE(http->tokens.empty());
        for (const auto& t : http->tokens) CHECK(all.find(t) == std::string::npos);
    }
    std::string bytes = slurp(journal) + slurp(journal + "-wal");
    REQUIRE(bytes.size() > 0);
    CHECK(bytes.find(kBmcPassword) == std::string::npos);
    for (const auto& t : http->tokens) CHECK(bytes.find(t) == std::string::npos);
}

// ---- firmware updates against kiln-bmc (SimpleUpdate, tasks, faults) ------

namespace {

json bmc_control(const BmcChild& bmc, const std::string& method, const std::string& what, const json& body = nullptr) {
    net::CurlHttpClient http;
    net::HttpRequest req;
    req.method = method;
    req.url = bmc.url() + "/kiln-bmc/" + what;
    if (!body.is_null()) {
        req.body = body.dump();
        req.headers.emplace_back("Content-Type", "application/json");
    }
    auto r = http.send(req);
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status / 100 == 2);
    return r->body.empty() ? json() : json::parse(r->body);
}

std::string image_toml(const kiln::test::TempDir& dir, const std::string& component, const std::string& version,
                       const std::string& file) {
    std::string content = "KILN-FW " + component + " " + version + "\n" + std::string(300000, 'p');
    std::string path = dir.write("artifacts/" + file, content);
    return "[[firmware.p.components]]\nname = \"" + component + "\"\nversion = \"" + version + "\"\nartifact = \"" +
           path + "\"\nsha256 = \"" + sha256_hex(content) + "\"\n";
}

void start_updating(BmcChild& bmc, const std::string& mockup) {
    REQUIRE(bmc.start({"--mockup", mockup_path(mockup), "--port", "0", "--task-seconds", "0.3", "--restart-seconds",
                       "0.5"},
                      {{"KILN_BMC_PASSWORD", kBmcPassword}}));
}

}  // namespace

TEST_CASE("kiln-bmc flashes the BIOS and the BMC once through SimpleUpdate and kiln's artifact server") {
    BmcChild bmc;
    start_updating(bmc, "dmtf-public-rackmount1");
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin") +
                     image_toml(dir, "BMC", "1.46.0-kiln", "bmc.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = fw}));
    FirmwareStage stage(nullptr, fast_options());
    auto first = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((first.error ? first.error->str() : std::string("ok")));
    REQUIRE_FALSE(first.error);
    CHECK(first.actions == std::vector<std::string>{"flash:BIOS:P79 v1.46", "flash:BMC:1.46.0-kiln"});
    auto state = bmc_control(bmc, "GET", "state");
    REQUIRE(state["updates"].size() == 2);
    REQUIRE(stage.artifact_server() != nullptr);
    CHECK(stage.artifact_server()->requests_served() == 2);

    auto second = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE_FALSE(second.error);
    CHECK(second.actions.empty());
    CHECK(bmc_control(bmc, "GET", "state")["updates"].size() == 2);
}

TEST_CASE("a BMC restart in the middle of an update and 503s and dropped connections are waited out") {
    BmcChild bmc;
    start_updating(bmc, "hpe-dl325");
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\n" + image_toml(dir, "BIOS", "A43 v2.60", "bios.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = fw}));
    bmc_control(bmc, "PATCH", "faults",
                {{"restart_mid_update", 1}, {"unavailable_requests", 2}, {"retry_after_s", 1}, {"drop_connections", 2}});
    FirmwareStage stage(nullptr, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    CHECK(run.actions == std::vector<std::string>{"flash:BIOS:A43 v2.60"});
    CHECK(bmc_control(bmc, "GET", "state")["updates"].size() == 1);
    CHECK(stage.sessions().acquire(*bmc_endpoint(fleet.nodes[0]))->stats().logins >= 2);
}

TEST_CASE("an update task that fails on kiln-bmc fails the node with a named reason and flashes nothing") {
    BmcChild bmc;
    start_updating(bmc, "dmtf-public-rackmount1");
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = fw}));
    bmc_control(bmc, "PATCH", "faults", {{"fail_tasks", 1}});
    FirmwareStage stage(nullptr, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE(run.error);
    CHECK(run.error->code == "redfish.task_failed");
    CHECK(run.error->message.find("ApplyFailed") != std::string::npos);
    CHECK(bmc_control(bmc, "GET", "state")["updates"].empty());
}

TEST_CASE("multipart push is used where SimpleUpdate is not offered") {
    kiln::test::TempDir dir;
    FakeBmc bmc;
    bmc.minimal_tree("1.0", "1.0");
    bmc.on("GET", "/redfish/v1/UpdateService",
           json_reply({{"FirmwareInventory", {{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory"}}},
                       {"MultipartHttpPushUri", "/redfish/v1/UpdateService/upload"}}));
    bmc.on("POST", "/redfish/v1/UpdateService/upload", Reply{204, "", {}, ""});
    bmc.hook = [&bmc](const net::HttpRequest& req, const std::string& path) {
        if (req.method == "POST" && path == "/redfish/v1/UpdateService/upload")
            bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
                   json_reply({{"Id", "BIOS"}, {"Name", "System BIOS"}, {"Version", "2.0"}}));
    };
    auto fleet = load_fleet_or_fail(
        write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .firmware_toml = firmware_toml(dir, "image")}));
    std::shared_ptr<net::HttpClient> transport(std::shared_ptr<void>(), &bmc);
    FirmwareStage stage(transport, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    std::vector<net::MultipartPart> parts;
    for (const auto& r : bmc.requests())
        if (r.method == "POST" && r.url.find("/upload") != std::string::npos) parts = r.multipart;
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].name == "UpdateParameters");
    auto params = json::parse(parts[0].data);
    CHECK(params["Targets"] == json::array({"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}));
    CHECK(params["@Redfish.OperationApplyTime"] == "Immediate");
    CHECK(parts[1].name == "UpdateFile");
    CHECK(parts[1].file_path.find("bios-2.0.bin") != std::string::npos);
    CHECK(stage.artifact_server() == nullptr);  // nothing served: pushed
}
