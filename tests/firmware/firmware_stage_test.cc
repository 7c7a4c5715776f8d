// The firmware stage: BIOS settings converged on kiln-bmc (HPE tree),
// firmware updates through kiln's artifact server against a scripted BMC
// (kiln-bmc's SimpleUpdate had not landed when these were written), crash
// safety, and secrets kept out of the journal, events and errors.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <thread>

#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/sha256.h"
#include "provisioner/engine/engine.h"
#include "provisioner/journal/sqlite_store.h"
#include "provisioner/net/url.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/fake_bmc.h"
#include "tests/firmware/firmware_fixture.h"
#include "tests/support/child.h"
#include "tests/support/pg_cluster.h"

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
    auto path = write_fleet(
        dir, {.bmc_urls = {bmc.url()}, .bios_toml = "[bios.b]\nsriov = false\niommu = true\nacs = false\n"});
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
    auto path = write_fleet(
        dir, {.bmc_urls = {bmc.url()}, .bios_toml = "[bios.b]\nattributes = { ProcTurbo = \"Enabled\" }\n"});
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

namespace {

struct CollectingSink : engine::EventSink {
    void on_event(const engine::EngineEvent& e) override {
        std::lock_guard<std::mutex> lock(mu);
        text += e.node + " " + e.stage + " " + e.message + " " + e.outcome + "\n";
    }
    std::mutex mu;
    std::string text;
};

// The HPE DL325 on kiln-bmc with a POST of 2 s after each reset, as a real
// host's takes minutes: BIOS settings, staged updates and a one-time boot
// override take effect when it ends.
void start_posting(BmcChild& bmc) {
    REQUIRE(bmc.start({"--mockup", mockup_path("hpe-dl325"), "--port", "0", "--post-seconds", "2"},
                      {{"KILN_BMC_PASSWORD", kBmcPassword}}));
}

// fast_options(), reading back a few times a second through that POST.
FirmwareStageOptions posting_options() {
    auto options = fast_options();
    options.settle_poll = milliseconds(200);
    return options;
}

// One engine run of `registry` over `fleet` on the SQLite journal at
// `journal_path`; what the event sink heard goes to `heard`.
Result<engine::RunReport> run_engine(const config::Fleet& fleet, engine::StageRegistry& registry,
                                     const std::string& journal_path, std::string* heard) {
    auto store = journal::open_sqlite_store(journal_path, {});
    if (!store) return store.error();
    CollectingSink sink;
    engine::StopToken stop;
    engine::Engine eng(fleet, registry, store->get(), &sink, stop);
    auto report = eng.run({});
    *heard = sink.text;
    return report;
}

}  // namespace

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
    int polls = 0;
    bmc.hook = [&bmc, &polls](const net::HttpRequest& req, const std::string& path) {
        if (req.method == "GET" && path == "/redfish/v1/TaskService/Tasks/9" && ++polls == 3)
            bmc.on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
                   json_reply({{"Id", "BIOS"}, {"Name", "System BIOS"}, {"Version", "2.0"}}));
    };
    auto path = write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .firmware_toml = firmware_toml(dir, "img")});
    auto fleet = load_fleet_or_fail(path);
    std::shared_ptr<net::HttpClient> transport(std::shared_ptr<void>(), &bmc);
    FirmwareStage stage(transport, fast_options());
    const bool through_engine = GENERATE(false, true);
    if (!through_engine) {
        auto run = run_stage(stage, fleet, fleet.nodes[0]);
        INFO((run.error ? run.error->str() : std::string("ok")));
        REQUIRE_FALSE(run.error);
        CHECK(run.actions == std::vector<std::string>{"flash:BIOS:2.0"});
    } else {
        // Through the engine the wait parks between polls, then the flash
        // goes on from the top and finds the version there.
        engine::StageRegistry registry;
        registry.add(std::shared_ptr<engine::Stage>(&stage, [](engine::Stage*) {}));
        auto store = journal::open_sqlite_store(dir.file("journal.db"), {});
        REQUIRE(store);
        CollectingSink sink;
        engine::StopToken stop;
        engine::Engine eng(fleet, registry, store->get(), &sink, stop);
        auto report = eng.run({});
        REQUIRE(report);
        INFO(sink.text);
        REQUIRE(report->status == kiln::engine::RunStatus::Completed);
        CHECK(report->actions == 1);
        CHECK(sink.text.find("waiting: task started before this run /redfish/v1/TaskService/Tasks/9 (Running)") !=
              std::string::npos);
    }
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

}  // namespace

TEST_CASE("after a firmware apply no password or session token is in the journal events or errors") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");
    kiln::test::TempDir dir;
    // node-0 converges; node-1 points at a BMC path that fails (no such
    // system tree), so error messages are produced and checked too.
    auto path =
        write_fleet(dir, {.bmc_urls = {bmc.url(), bmc.url() + "/broken"}, .bios_toml = "[bios.b]\nsriov = false\n"});
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
        for (const auto& n : report->nodes) all += n.node + " " + engine::to_string(n.state) + " " + n.error + "\n";
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
    REQUIRE(
        bmc.start({"--mockup", mockup_path(mockup), "--port", "0", "--task-seconds", "0.3", "--restart-seconds", "0.5"},
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

TEST_CASE("an engine run parks each node between update task polls and flashes each kiln-bmc once") {
    // Three BMCs flashed through the engine: the update task's polls park
    // (the node holds no thread while the BMC works), and every BMC still
    // gets each image exactly once, in this run and in a second one.
    std::vector<std::unique_ptr<BmcChild>> bmcs;
    std::vector<std::string> urls;
    for (int i = 0; i < 3; ++i) {
        bmcs.push_back(std::make_unique<BmcChild>());
        start_updating(*bmcs.back(), "dmtf-public-rackmount1");
        urls.push_back(bmcs.back()->url());
    }
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin") +
                     image_toml(dir, "BMC", "1.46.0-kiln", "bmc.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = urls, .firmware_toml = fw}));
    engine::StageRegistry registry;
    registry.add(std::make_shared<FirmwareStage>(nullptr, fast_options()));
    for (int round = 0; round < 2; ++round) {
        std::string heard;
        auto report = run_engine(fleet, registry, dir.file("journal.db"), &heard);
        REQUIRE(report);
        INFO(heard);
        REQUIRE(report->status == kiln::engine::RunStatus::Completed);
        CHECK(report->actions == (round == 0 ? 6 : 0));
        if (round == 0) {
            // Each node parked on its update tasks at least once.
            for (const auto& n : fleet.nodes) {
                CHECK(heard.find(n.name + " firmware waiting: BIOS: update task") != std::string::npos);
                CHECK(heard.find(n.name + " firmware waiting: BMC: update task") != std::string::npos);
            }
        }
        for (const auto& b : bmcs) CHECK(bmc_control(*b, "GET", "state")["updates"].size() == 2);
    }
}

TEST_CASE("an engine run parks a node while its host POSTs the new BIOS settings") {
    // kiln-bmc applies BIOS settings 2 s after the reset, as a real POST
    // does minutes after it: the node waits parked, holding no thread.
    BmcChild bmc;
    start_posting(bmc);
    kiln::test::TempDir dir;
    auto fleet = load_fleet_or_fail(
        write_fleet(dir, {.bmc_urls = {bmc.url()}, .bios_toml = "[bios.b]\nsriov = false\niommu = true\n"}));
    engine::StageRegistry registry;
    registry.add(std::make_shared<FirmwareStage>(nullptr, posting_options()));
    std::string heard;
    auto report = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(report);
    INFO(heard);
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);
    CHECK(report->actions == 1);
    CHECK(heard.find(fleet.nodes[0].name + " firmware waiting: POST applying the BIOS settings") != std::string::npos);
    // Applied, nothing left pending: a second run has nothing to do.
    auto second = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(second);
    CHECK(second->status == kiln::engine::RunStatus::Completed);
    CHECK(second->actions == 0);
}

TEST_CASE("a BMC restart in the middle of an update and 503s and dropped connections are waited out") {
    BmcChild bmc;
    start_updating(bmc, "hpe-dl325");
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\n" + image_toml(dir, "BIOS", "A43 v2.60", "bios.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = fw}));
    bmc_control(
        bmc, "PATCH", "faults",
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

// ---- host OS boot through virtual media; update apply time OnReset --------

namespace {

// The real transport, remembering every request that changes something on
// a BMC ("METHOD /path"), logins and logouts aside.
class WriteLog : public net::HttpClient {
public:
    Result<net::HttpResponse> send(const net::HttpRequest& request) override {
        auto parts = net::split_url(request.url);
        std::string path = parts ? parts->target : request.url;
        if (request.method != "GET" && path.find("/SessionService/Sessions") == std::string::npos) {
            std::lock_guard<std::mutex> lock(mu_);
            writes_.push_back(request.method + " " + path);
        }
        return inner_.send(request);
    }
    std::vector<std::string> writes() {
        std::lock_guard<std::mutex> lock(mu_);
        return writes_;
    }
    void clear() {
        std::lock_guard<std::mutex> lock(mu_);
        writes_.clear();
    }

private:
    net::CurlHttpClient inner_;
    std::mutex mu_;
    std::vector<std::string> writes_;
};

json bmc_call(const BmcChild& bmc, const std::string& method, const std::string& path, const json& body = nullptr) {
    net::CurlHttpClient http;
    net::HttpRequest req;
    req.method = method;
    req.url = bmc.url() + path;
    req.basic_user = "admin";
    req.basic_password = kBmcPassword;
    if (!body.is_null()) {
        req.body = body.dump();
        req.headers.emplace_back("Content-Type", "application/json");
    }
    auto r = http.send(req);
    REQUIRE(r);
    INFO(method << " " << path << ": " << r->body);
    REQUIRE(r->status / 100 == 2);
    return r->body.empty() ? json() : json::parse(r->body);
}

struct HostOs {
    std::string toml;
    std::string sha256;
    std::string suffix;  // how the served URL ends: /<sha256 prefix>/installer.iso
};

// [host_os.os] with an image under the fleet folder, named relative to it.
HostOs host_os(const kiln::test::TempDir& dir, const std::string& content, const std::string& sha = "") {
    dir.write("iso/installer.iso", content);
    HostOs h;
    h.sha256 = sha256_hex(content);
    h.suffix = "/" + h.sha256.substr(0, 16) + "/installer.iso";
    h.toml = "[host_os.os]\nimage = \"iso/installer.iso\"\nsha256 = \"" + (sha.empty() ? h.sha256 : sha) + "\"\n";
    return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TEST_CASE("host OS boot on kiln-bmc arms a one-time Cd boot inserts the image and resets the host once") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");  // iLO: the CD is the Manager's VirtualMedia/2
    kiln::test::TempDir dir;
    auto os = host_os(dir, "ISO 9660 " + std::string(50000, 'i'));
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .extra_toml = os.toml}));
    auto http = std::make_shared<WriteLog>();
    FirmwareStage stage(http, fast_options());

    auto first = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((first.error ? first.error->str() : std::string("ok")));
    REQUIRE_FALSE(first.error);
    CHECK(first.actions == std::vector<std::string>{"boot:os:" + os.sha256.substr(0, 12)});
    CHECK(http->writes() ==
          std::vector<std::string>{"PATCH /redfish/v1/Systems/1",
                                   "POST /redfish/v1/Managers/1/VirtualMedia/2/Actions/VirtualMedia.InsertMedia",
                                   "POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset"});
    auto media = bmc_call(bmc, "GET", "/redfish/v1/Managers/1/VirtualMedia/2");
    CHECK(media["Inserted"] == true);
    CHECK(media["WriteProtected"] == true);
    CHECK(ends_with(media["Image"].get<std::string>(), os.suffix));
    // The boot the reset started read the CD, and used the override up.
    auto boot = bmc_control(bmc, "GET", "state")["last_boot"];
    CHECK(boot["source"] == "Cd");
    CHECK(boot["reset_type"] == "ForceRestart");
    CHECK(boot["media"]["image"] == media["Image"]);
    auto sys = bmc_call(bmc, "GET", "/redfish/v1/Systems/1");
    CHECK(sys["Boot"]["BootSourceOverrideEnabled"] == "Disabled");
    CHECK(sys["PowerState"] == "On");

    // A re-run (even by another kiln, another artifact server) plans nothing.
    http->clear();
    FirmwareStage again(http, fast_options());
    auto second = run_stage(again, fleet, fleet.nodes[0]);
    REQUIRE_FALSE(second.error);
    CHECK(second.actions.empty());
    CHECK(http->writes().empty());
}

TEST_CASE("an engine run parks a node while its host POSTs and boots the host OS image") {
    // POST takes 2 s on this kiln-bmc: the one-time Cd override stays armed
    // until it ends, and the node waits parked until the boot has started.
    BmcChild bmc;
    start_posting(bmc);
    kiln::test::TempDir dir;
    auto os = host_os(dir, "ISO 9660 " + std::string(50000, 'i'));
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .extra_toml = os.toml}));
    engine::StageRegistry registry;
    registry.add(std::make_shared<FirmwareStage>(nullptr, posting_options()));
    std::string heard;
    auto report = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(report);
    INFO(heard);
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);
    CHECK(report->actions == 1);
    CHECK(heard.find(fleet.nodes[0].name + " firmware waiting: the host booting host OS") != std::string::npos);
    auto sys = bmc_call(bmc, "GET", "/redfish/v1/Systems/1");
    CHECK(sys["Boot"]["BootSourceOverrideEnabled"] == "Disabled");
    CHECK(bmc_control(bmc, "GET", "state")["last_boot"]["source"] == "Cd");
}

TEST_CASE("a host reset the BMC answers with a task is followed parked and sent once in each of its three uses") {
    // kiln-bmc answers ComputerSystem.Reset with a 1 s task (as HPE's RMC
    // does): the BIOS write, the host OS boot and an update staged OnReset
    // each reset the host, wait for that task parked, and go on after it
    // without sending the reset again.
    BmcChild bmc;
    kiln::test::TempDir dir;
    FleetSpec files;
    // POST outlasts the reset's task: what follows the reset waits too.
    std::string mockup = "hpe-dl325", waited_after;
    SECTION("the BIOS settings") {
        files.bios_toml = "[bios.b]\nsriov = false\niommu = true\n";
        waited_after = " firmware waiting: POST applying the BIOS settings";
    }
    SECTION("the host OS boot") {
        files.extra_toml = host_os(dir, "ISO 9660 " + std::string(50000, 'i')).toml;
        waited_after = " firmware waiting: the host booting host OS";
    }
    SECTION("an update staged OnReset") {
        mockup = "dmtf-public-rackmount1";
        files.firmware_toml =
            "[firmware.p]\napply_time = \"OnReset\"\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin");
    }
    REQUIRE(bmc.start({"--mockup", mockup_path(mockup), "--port", "0", "--task-seconds", "0.3", "--reset-task-seconds",
                       "1", "--post-seconds", "2.5"},
                      {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    files.bmc_urls = {bmc.url()};
    auto fleet = load_fleet_or_fail(write_fleet(dir, files));
    engine::StageRegistry registry;
    registry.add(std::make_shared<FirmwareStage>(nullptr, posting_options()));
    std::string heard;
    auto report = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(report);
    INFO(heard);
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);
    CHECK(report->actions == 1);
    CHECK(heard.find(fleet.nodes[0].name + " firmware waiting: host reset (") != std::string::npos);
    if (!waited_after.empty()) CHECK(heard.find(waited_after) != std::string::npos);
    CHECK(bmc_control(bmc, "GET", "state")["resets"] == 1);
    // Done, and seen done: a second run changes nothing.
    auto second = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(second);
    CHECK(second->status == kiln::engine::RunStatus::Completed);
    CHECK(second->actions == 0);
    CHECK(bmc_control(bmc, "GET", "state")["resets"] == 1);
}

TEST_CASE("host OS boot replaces the inserted image and powers on a host that is off") {
    BmcChild bmc;
    start(bmc, "dmtf-public-rackmount1");  // CD under the ComputerSystem, an image already in
    const std::string sys_uri = "/redfish/v1/Systems/437XR1138R2";
    bmc_call(bmc, "POST", sys_uri + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceOff"}});
    kiln::test::TempDir dir;
    auto os = host_os(dir, "installer image");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .extra_toml = os.toml}));
    auto http = std::make_shared<WriteLog>();
    FirmwareStage stage(http, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    CHECK(http->writes() ==
          std::vector<std::string>{"PATCH " + sys_uri,
                                   "POST " + sys_uri + "/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia",
                                   "POST " + sys_uri + "/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia",
                                   "POST " + sys_uri + "/Actions/ComputerSystem.Reset"});
    auto boot = bmc_control(bmc, "GET", "state")["last_boot"];
    CHECK(boot["reset_type"] == "On");
    CHECK(boot["source"] == "Cd");
    CHECK(ends_with(boot["media"]["image"].get<std::string>(), os.suffix));
    CHECK(bmc_call(bmc, "GET", sys_uri)["PowerState"] == "On");
}

TEST_CASE("host OS media and boot override writes the BMC answers with tasks are followed parked and sent once") {
    // kiln-bmc answers the override PATCH, EjectMedia and InsertMedia with
    // 1 s tasks (DSP0266 lets any operation answer 202): the node parks on
    // each and goes on from the step it was at, sending nothing twice.
    BmcChild bmc;
    REQUIRE(bmc.start({"--mockup", mockup_path("dmtf-public-rackmount1"), "--port", "0", "--media-task-seconds", "1"},
                      {{"KILN_BMC_PASSWORD", kBmcPassword}}));
    const std::string sys_uri = "/redfish/v1/Systems/437XR1138R2";
    kiln::test::TempDir dir;
    auto os = host_os(dir, "ISO 9660 " + std::string(50000, 'i'));
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .extra_toml = os.toml}));
    auto http = std::make_shared<WriteLog>();
    engine::StageRegistry registry;
    registry.add(std::make_shared<FirmwareStage>(http, posting_options()));
    std::string heard;
    auto report = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(report);
    INFO(heard);
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);
    CHECK(report->actions == 1);
    for (const char* step : {"arm", "eject", "insert"})
        CHECK(heard.find(fleet.nodes[0].name + " firmware waiting: host OS media: " + step + " ") != std::string::npos);
    CHECK(http->writes() ==
          std::vector<std::string>{"PATCH " + sys_uri,
                                   "POST " + sys_uri + "/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia",
                                   "POST " + sys_uri + "/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia",
                                   "POST " + sys_uri + "/Actions/ComputerSystem.Reset"});
    CHECK(bmc_control(bmc, "GET", "state")["resets"] == 1);
    auto boot = bmc_control(bmc, "GET", "state")["last_boot"];
    CHECK(boot["source"] == "Cd");
    CHECK(ends_with(boot["media"]["image"].get<std::string>(), os.suffix));
    // Booted, and seen booted: a second run writes nothing.
    http->clear();
    auto second = run_engine(fleet, registry, dir.file("journal.db"), &heard);
    REQUIRE(second);
    CHECK(second->status == kiln::engine::RunStatus::Completed);
    CHECK(second->actions == 0);
    CHECK(http->writes().empty());
}

TEST_CASE("a host OS image whose sha256 differs fails before anything is sent to the BMC") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");
    kiln::test::TempDir dir;
    auto os = host_os(dir, "not the installer", std::string(64, 'c'));
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .extra_toml = os.toml}));
    auto http = std::make_shared<WriteLog>();
    FirmwareStage stage(http, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE(run.error);
    CHECK(run.error->code == "firmware.artifact_digest");
    CHECK(run.error->message.find("installer.iso") != std::string::npos);
    CHECK(http->writes().empty());
    CHECK(bmc_call(bmc, "GET", "/redfish/v1/Managers/1/VirtualMedia/2")["Inserted"] == false);
    CHECK(bmc_control(bmc, "GET", "state")["last_boot"].is_null());
}

TEST_CASE("a BMC without a virtual CD fails the plan with a named reason") {
    kiln::test::TempDir dir;
    FakeBmc bmc;
    bmc.minimal_tree();
    auto os = host_os(dir, "iso");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .extra_toml = os.toml}));
    std::shared_ptr<net::HttpClient> transport(std::shared_ptr<void>(), &bmc);
    FirmwareStage stage(transport, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE(run.error);
    CHECK(run.error->code == "firmware.no_virtual_media");
    CHECK(run.error->message.find("node node-0: host_os 'os'") != std::string::npos);
    CHECK(run.error->message.find("no virtual CD/DVD drive") != std::string::npos);
    CHECK(run.actions.empty());
    for (const auto& r : bmc.requests())
        CHECK((r.method == "GET" || r.url.find("/SessionService/Sessions") != std::string::npos));
}

TEST_CASE("a BMC whose VirtualMedia has no InsertMedia action gets the image by PATCH") {
    kiln::test::TempDir dir;
    FakeBmc bmc;
    bmc.minimal_tree();
    const std::string sys = "/redfish/v1/Systems/S1", cd = "/redfish/v1/Systems/S1/VirtualMedia/CD";
    auto system = [&](const std::string& target, const std::string& enabled) {
        return json_reply({{"@odata.id", sys},
                           {"PowerState", "On"},
                           {"VirtualMedia", {{"@odata.id", sys + "/VirtualMedia"}}},
                           {"Boot", {{"BootSourceOverrideTarget", target}, {"BootSourceOverrideEnabled", enabled}}},
                           {"Actions",
                            {{"#ComputerSystem.Reset",
                              {{"target", sys + "/Actions/ComputerSystem.Reset"},
                               {"ResetType@Redfish.AllowableValues", {"On", "ForceRestart"}}}}}}},
                          200, {{"ETag", "\"" + target + enabled + "\""}});
    };
    bmc.on("GET", sys, system("None", "Disabled"));
    bmc.on("GET", sys + "/VirtualMedia", json_reply({{"Members", {{{"@odata.id", cd}}}}}));
    bmc.on("GET", cd,
           json_reply({{"MediaTypes", {"CD"}}, {"Image", nullptr}, {"Inserted", false}}, 200, {{"ETag", "\"e1\""}}));
    bmc.on("PATCH", sys, json_reply({}, 200));
    bmc.on("PATCH", cd, json_reply({}, 200));
    bmc.on("POST", sys + "/Actions/ComputerSystem.Reset", Reply{204, "", {}, ""});
    bmc.hook = [&](const net::HttpRequest& req, const std::string& path) {
        if (req.method == "PATCH" && path == sys) bmc.on("GET", sys, system("Cd", "Once"));
        if (req.method == "PATCH" && path == cd) {
            auto body = json::parse(req.body);
            bmc.on("GET", cd,
                   json_reply({{"MediaTypes", {"CD"}}, {"Image", body["Image"]}, {"Inserted", body["Inserted"]}}));
        }
        if (req.method == "POST" && path == sys + "/Actions/ComputerSystem.Reset")
            bmc.on("GET", sys, system("Cd", "Disabled"));
    };
    auto os = host_os(dir, "iso bytes");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {"http://bmc.test:8000"}, .extra_toml = os.toml}));
    std::shared_ptr<net::HttpClient> transport(std::shared_ptr<void>(), &bmc);
    FirmwareStage stage(transport, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    json media;
    std::string boot_if_match;
    for (const auto& r : bmc.requests()) {
        if (r.method == "PATCH" && r.url.find("/VirtualMedia/CD") != std::string::npos) media = json::parse(r.body);
        if (r.method == "PATCH" && ends_with(r.url, sys)) {
            CHECK(json::parse(r.body) ==
                  json{{"Boot", {{"BootSourceOverrideTarget", "Cd"}, {"BootSourceOverrideEnabled", "Once"}}}});
            for (const auto& [k, v] : r.headers)
                if (k == "If-Match") boot_if_match = v;
        }
    }
    CHECK(boot_if_match == "\"NoneDisabled\"");
    CHECK(ends_with(media.value("Image", ""), os.suffix));
    CHECK(media["Inserted"] == true);
    CHECK(media["WriteProtected"] == true);
    CHECK(bmc.count("POST", sys + "/Actions/ComputerSystem.Reset") == 1);
}

TEST_CASE("an update with apply_time OnReset is staged by the BMC and activated by one host reset") {
    BmcChild bmc;
    start_updating(bmc, "dmtf-public-rackmount1");
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\napply_time = \"OnReset\"\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = fw}));
    auto http = std::make_shared<WriteLog>();
    FirmwareStage stage(http, fast_options());
    auto first = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((first.error ? first.error->str() : std::string("ok")));
    REQUIRE_FALSE(first.error);
    CHECK(first.actions == std::vector<std::string>{"flash:BIOS:P79 v1.46"});
    CHECK(http->writes() ==
          std::vector<std::string>{"POST /redfish/v1/UpdateService/Actions/SimpleUpdate",
                                   "POST /redfish/v1/Systems/437XR1138R2/Actions/ComputerSystem.Reset"});
    auto state = bmc_control(bmc, "GET", "state");
    REQUIRE(state["updates"].size() == 1);
    CHECK(state["pending_updates"].empty());
    CHECK(state["last_boot"]["reset_type"] == "ForceRestart");
    // The task said the image waited for a reset.
    auto task = bmc_call(bmc, "GET", "/redfish/v1/TaskService/Tasks/" + state["updates"][0]["task"].get<std::string>());
    CHECK(task.dump().find("AwaitToActivate") != std::string::npos);

    auto second = run_stage(stage, fleet, fleet.nodes[0]);
    REQUIRE_FALSE(second.error);
    CHECK(second.actions.empty());
}

TEST_CASE("an update staged OnReset by a run killed before its reset is activated not flashed again") {
    BmcChild bmc;
    start_updating(bmc, "dmtf-public-rackmount1");
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\napply_time = \"OnReset\"\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin");
    auto fleet = load_fleet_or_fail(write_fleet(dir, {.bmc_urls = {bmc.url()}, .firmware_toml = fw}));
    const auto& comp = firmware::firmware_profiles(fleet)->at("p").components[0];
    // The killed run: the image served as kiln serves it, SimpleUpdate
    // OnReset sent, the task followed to its end, and no reset.
    auto server = ArtifactServer::start({});
    REQUIRE(server);
    auto url = (*server)->publish(comp.artifact, comp.sha256, true);
    REQUIRE(url);
    json accepted = bmc_call(bmc, "POST", "/redfish/v1/UpdateService/Actions/SimpleUpdate",
                             {{"ImageURI", *url},
                              {"Targets", {"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}},
                              {"@Redfish.OperationApplyTime", "OnReset"}});
    const std::string task_uri = accepted["@odata.id"];
    json task;
    for (int i = 0; i < 600; ++i) {  // polled until the emulator says Completed (0.3 s task)
        task = bmc_call(bmc, "GET", task_uri);
        if (task["TaskState"] != "New" && task["TaskState"] != "Running") break;
        std::this_thread::sleep_for(milliseconds(20));
    }
    REQUIRE(task["TaskState"] == "Completed");
    REQUIRE(bmc_control(bmc, "GET", "state")["pending_updates"].size() == 1);

    auto http = std::make_shared<WriteLog>();
    FirmwareStage stage(http, fast_options());
    auto run = run_stage(stage, fleet, fleet.nodes[0]);
    INFO((run.error ? run.error->str() : std::string("ok")));
    REQUIRE_FALSE(run.error);
    CHECK(run.actions == std::vector<std::string>{"flash:BIOS:P79 v1.46"});
    CHECK(http->writes() ==
          std::vector<std::string>{"POST /redfish/v1/Systems/437XR1138R2/Actions/ComputerSystem.Reset"});
    CHECK(bmc_control(bmc, "GET", "state")["updates"].size() == 1);
    bool noted = false;
    for (const auto& e : run.events) noted |= e.find("staged on the BMC by an earlier run") != std::string::npos;
    CHECK(noted);
}

TEST_CASE("three kiln workers on one PostgreSQL flash six kiln-bmc BMCs, each image exactly once", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    std::vector<std::unique_ptr<BmcChild>> bmcs;
    std::vector<std::string> urls;
    for (int i = 0; i < 6; ++i) {
        bmcs.push_back(std::make_unique<BmcChild>());
        start_updating(*bmcs.back(), "dmtf-public-rackmount1");
        urls.push_back(bmcs.back()->url());
    }
    kiln::test::TempDir dir;
    std::string fw = "[firmware.p]\n" + image_toml(dir, "BIOS", "P79 v1.46", "bios.bin") +
                     image_toml(dir, "BMC", "1.46.0-kiln", "bmc.bin");
    const std::string fleet = write_fleet(dir, {.bmc_urls = urls, .firmware_toml = fw});
    const std::string url = cluster->create_database();
    const std::map<std::string, std::string> env = {{"KILN_FW_TEST_PASSWORD", kBmcPassword}};
    std::vector<std::unique_ptr<kiln::test::RunningChild>> workers;
    for (const char* id : {"w1", "w2", "w3"})
        workers.push_back(std::make_unique<kiln::test::RunningChild>(
            std::vector<std::string>{KILN_BINARY, "--store", url, "worker", fleet, "--worker-id", id, "--lease-ttl",
                                     "5s", "--poll", "100ms"},
            env, dir.file(id)));
    for (auto& w : workers) {
        bool timed_out = false;
        auto r = w->wait(240, &timed_out);
        INFO(r.out << r.err);
        REQUIRE_FALSE(timed_out);
        REQUIRE(r.exit_code == 0);
    }
    // Read back from the emulators: what each BMC was given.
    for (size_t i = 0; i < bmcs.size(); ++i) {
        INFO("BMC " << i << " (" << urls[i] << ")");
        const json updates = bmc_control(*bmcs[i], "GET", "state")["updates"];
        REQUIRE(updates.is_array());
        CHECK(updates.size() == 2);  // the BIOS and the BMC image, each once
    }
    // And the fleet is converged: a plan on the shared store finds nothing.
    auto plan = kiln::test::run_child({KILN_BINARY, "--store", url, "plan", fleet, "--detailed-exitcode"}, env);
    INFO(plan.out << plan.err);
    CHECK(plan.exit_code == 0);
}
