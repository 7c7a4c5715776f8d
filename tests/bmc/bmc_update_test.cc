// In-process tests of kiln-bmc's UpdateService, tasks, VirtualMedia, boot
// override and faults: requests built by hand, a fake wall clock that the
// test moves (no sleeps), images served by a loopback ImageServer.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "firmware/bmc/bmc_state.h"
#include "firmware/bmc/firmware_image.h"
#include "firmware/bmc/firmware_inventory.h"
#include "tests/bmc/bmc_test_util.h"

using namespace kiln::bmc;
using kiln::bmc::test::body_of;
using kiln::bmc::test::request;
using kiln::bmc::test::ScratchDir;
using nlohmann::json;

namespace {

const char* kDmtf = "dmtf-public-rackmount1";
const char* kHpe = "hpe-dl325";
const std::string kSystem = "/redfish/v1/Systems/437XR1138R2";
const std::string kSimpleUpdate = "/redfish/v1/UpdateService/Actions/SimpleUpdate";
const std::string kPush = "/redfish/v1/UpdateService/update-multipart";

// The wall clock the BMC sees; tests move it.
struct FakeWall {
    double t = 1.8e9;
};

struct Bmc {
    FakeWall wall;
    ScratchDir spool;
    std::unique_ptr<BmcState> state;

    explicit Bmc(const std::string& mockup, const std::string& state_file = "", FaultSettings faults = {},
                 double task_seconds = 10, std::optional<VendorMode> vendor = std::nullopt) {
        open(mockup, state_file, faults, task_seconds, vendor);
    }
    void open(const std::string& mockup, const std::string& state_file, FaultSettings faults, double task_seconds,
              std::optional<VendorMode> vendor = std::nullopt) {
        BmcConfig c;
        c.vendor = vendor;
        c.user = "admin";
        c.password = test::kPassword;
        c.state_file = state_file;
        c.task_seconds = task_seconds;
        c.restart_seconds = 2;
        c.download.spool_dir = spool.path();
        c.download.timeout = std::chrono::seconds(20);
        c.faults = faults;
        c.wall_clock = [w = &wall] { return w->t; };
        auto s = BmcState::open(test::mockup(mockup), std::move(c));
        if (!s) FAIL(s.error().str());
        state = std::move(*s);
    }
    BmcResponse call(const std::string& method, const std::string& path, const json& body = nullptr,
                     HeaderMap headers = {}) {
        if (!headers.count("X-Auth-Token")) headers["Authorization"] = test::basic_auth("admin", test::kPassword);
        return state->handle(request(method, path, body.is_null() ? "" : body.dump(), headers));
    }
    json get(const std::string& path) {
        auto r = call("GET", path);
        INFO(path << ": " << r.body);
        REQUIRE(r.status == 200);
        return body_of(r);
    }
    // A multipart push as the transport hands it over: the file spooled.
    BmcResponse push(const std::string& image, const json& parameters, const HeaderMap& headers = {}) {
        auto sink = ImageSink::create(spool.path(), 1u << 30);
        REQUIRE(sink);
        REQUIRE(sink->write(image.data(), image.size()));
        auto received = sink->finish();
        REQUIRE(received);
        BmcRequest r = request("POST", kPush, "", headers);
        if (!headers.count("X-Auth-Token")) r.headers["Authorization"] = test::basic_auth("admin", test::kPassword);
        MultipartBody mp;
        mp.has_parameters = !parameters.is_null();
        mp.parameters = parameters.is_null() ? "" : parameters.dump();
        mp.file_path = received->path;
        mp.file_name = "image.bin";
        mp.file_sha256 = received->sha256;
        mp.file_size = received->size;
        mp.file_head = received->head;
        r.multipart = mp;
        return state->handle(r);
    }
    std::string login() {
        auto r = state->handle(request("POST", "/redfish/v1/SessionService/Sessions",
                                       json{{"UserName", "admin"}, {"Password", test::kPassword}}.dump()));
        REQUIRE(r.status == 201);
        return r.header("X-Auth-Token");
    }
};

std::string message_ids(const json& task) {
    std::string out;
    for (const auto& m : task["Messages"]) out += m["MessageId"].get<std::string>() + " ";
    return out;
}

std::string error_id(const BmcResponse& r) {
    return body_of(r)["error"]["@Message.ExtendedInfo"][0]["MessageId"];
}

size_t files_in(const std::string& dir) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        (void)e;
        ++n;
    }
    return n;
}

}  // namespace

TEST_CASE("firmware image header names component and version") {
    auto h = parse_image_header("KILN-FW BIOS P79 v1.46\nbinary");
    REQUIRE(h);
    CHECK(h->component == "BIOS");
    CHECK(h->version == "P79 v1.46");
    CHECK_FALSE(parse_image_header("MZ\x90\x00 not an image"));
    CHECK_FALSE(parse_image_header("KILN-FW BIOS\n"));
    CHECK(parse_image_header("KILN-FW\tBIOS 1\n").error().code == "bmc.image_not_kiln");
}

TEST_CASE("a copied resource store shares bodies until one side replaces its own") {
    ResourceStore base(test::mockup(kDmtf));
    const std::string uri = "/redfish/v1/Systems/437XR1138R2";
    const std::string& etag = base.etag(uri);
    ResourceStore copy = base;
    CHECK(&copy.body(uri) == &base.body(uri));  // one body, not two
    json changed = copy.body(uri);
    changed["AssetTag"] = "copy-only";
    copy.replace(uri, changed);
    CHECK(copy.body(uri)["AssetTag"] == "copy-only");
    CHECK(base.body(uri)["AssetTag"] == "Chicago-45Z-2381");
    CHECK(base.etag(uri) == etag);
    CHECK(copy.etag(uri) != etag);
    CHECK(base.changed().empty());
    CHECK(copy.changed().count(uri) == 1);
    // Two BMCs opened from one template are two BMCs.
    const auto tmpl = BmcState::prepare(test::mockup(kDmtf), std::nullopt);
    BmcConfig config;
    config.password = "pw";
    auto a = BmcState::open(*tmpl, config);
    auto b = BmcState::open(*tmpl, config);
    REQUIRE(a);
    REQUIRE(b);
    const HeaderMap basic = {{"Authorization", test::basic_auth("admin", "pw")}};
    auto patched = (*a)->handle(request("PATCH", uri, R"({"AssetTag": "only-a"})", basic));
    CHECK(patched.status == 200);
    CHECK(body_of((*a)->handle(request("GET", uri, "", basic)))["AssetTag"] == "only-a");
    CHECK(body_of((*b)->handle(request("GET", uri, "", basic)))["AssetTag"] == "Chicago-45Z-2381");
}

TEST_CASE("firmware inventory members are classed as BIOS, BMC or NIC in both mockups") {
    ResourceStore dmtf(test::mockup(kDmtf));
    CHECK(component_class(dmtf.body("/redfish/v1/UpdateService/FirmwareInventory/BIOS")) == "bios");
    CHECK(component_class(dmtf.body("/redfish/v1/UpdateService/FirmwareInventory/BMC")) == "bmc");
    CHECK(component_class(dmtf.body("/redfish/v1/UpdateService/FirmwareInventory/SS")) == "");
    ResourceStore hpe(test::mockup(kHpe));
    CHECK(component_class(hpe.body("/redfish/v1/UpdateService/FirmwareInventory/1")) == "bmc");
    CHECK(component_class(hpe.body("/redfish/v1/UpdateService/FirmwareInventory/2")) == "bios");
    CHECK(component_class(hpe.body("/redfish/v1/UpdateService/FirmwareInventory/6")) == "");  // the backup ROM
    CHECK(component_class(hpe.body("/redfish/v1/UpdateService/FirmwareInventory/10")) == "nic");
    auto nics = update_targets(hpe, "NIC", {});
    REQUIRE(nics);
    CHECK(nics->size() == 2);
    auto by_system = update_targets(dmtf, "BIOS", {kSystem});
    REQUIRE(by_system);
    CHECK(by_system->at(0) == "/redfish/v1/UpdateService/FirmwareInventory/BIOS");
    CHECK(update_targets(dmtf, "BMC", {"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}).error().code ==
          "bmc.target_mismatch");
    CHECK(update_targets(dmtf, "NIC", {}).error().code == "bmc.no_targets");
}

TEST_CASE("bmc update SimpleUpdate downloads the image and its task runs New, Running, Completed") {
    test::ImageServer images({{"/bios.bin", test::kiln_image("BIOS", "2.4.1")}});
    Bmc bmc(kDmtf);
    CHECK(bmc.get("/redfish/v1/UpdateService")["MultipartHttpPushUri"] == kPush);
    // It takes @Redfish.OperationApplyTime, and says so on the action.
    CHECK(bmc.get("/redfish/v1/UpdateService")["Actions"]["#UpdateService.SimpleUpdate"]
                                              ["@Redfish.OperationApplyTimeSupport"]["SupportedValues"] ==
          json::array({"Immediate", "OnReset"}));

    auto r = bmc.call("POST", kSimpleUpdate,
                      {{"ImageURI", images.url("/bios.bin")},
                       {"TransferProtocol", "HTTP"},
                       {"Targets", {"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}}});
    INFO(r.body);
    REQUIRE(r.status == 202);
    const std::string monitor = r.header("Location");
    CHECK(monitor.rfind("/redfish/v1/TaskService/TaskMonitors/", 0) == 0);
    CHECK(r.header("Retry-After") == "1");
    const json accepted = body_of(r);
    CHECK(accepted["TaskState"] == "New");
    const std::string task_uri = accepted["@odata.id"];
    bmc.state->wait_downloads();
    CHECK(images.requests() == 1);

    auto first = bmc.call("GET", monitor);
    CHECK(first.status == 202);
    CHECK(body_of(first)["TaskState"] == "New");
    bmc.wall.t += 5;
    auto half = bmc.call("GET", monitor);
    CHECK(half.status == 202);
    CHECK(body_of(half)["TaskState"] == "Running");
    CHECK(body_of(half)["PercentComplete"] == 50);
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/BIOS")["Version"] == "P79 v1.45");

    bmc.wall.t += 5;
    auto done = bmc.call("GET", monitor);
    CHECK(done.status == 200);
    const json task = body_of(done);
    CHECK(task["TaskState"] == "Completed");
    CHECK(task["TaskStatus"] == "OK");
    CHECK(task["PercentComplete"] == 100);
    CHECK(message_ids(task).find("Update.1.0.UpdateSuccessful") != std::string::npos);
    CHECK(bmc.get(task_uri)["TaskState"] == "Completed");
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/BIOS")["Version"] == "2.4.1");
    CHECK(bmc.get(kSystem)["BiosVersion"] == "2.4.1");
    bool listed = false;
    const json tasks = bmc.get("/redfish/v1/TaskService/Tasks");
    for (const auto& m : tasks["Members"]) listed |= m["@odata.id"] == task_uri;
    CHECK(listed);
    auto state = body_of(bmc.state->handle(request("GET", "/kiln-bmc/state")));
    REQUIRE(state["updates"].size() == 1);
    CHECK(state["updates"][0]["version"] == "2.4.1");
    CHECK(files_in(bmc.spool.path()) == 0);  // the spooled image is gone
}

TEST_CASE("bmc update without Targets goes to every member of the image's class") {
    test::ImageServer images({{"/nic.bin", test::kiln_image("NIC", "28.39.1002")}});
    Bmc bmc(kHpe);
    auto r = bmc.call("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                      {{"ImageURI", images.url("/nic.bin")}});
    REQUIRE(r.status == 202);
    bmc.state->wait_downloads();
    bmc.wall.t += 10;
    CHECK(body_of(bmc.call("GET", r.header("Location")))["TaskState"] == "Completed");
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/10")["Version"] == "28.39.1002");
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/11")["Version"] == "28.39.1002");
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/2")["Version"] == "A43 v2.52 (10/29/2021)");
}

TEST_CASE("bmc update a BMC image restarts the BMC: 503 for a moment, then old tokens get 401") {
    Bmc bmc(kDmtf);
    const std::string token = bmc.login();
    auto r = bmc.push(test::kiln_image("BMC", "7.10"), {{"Targets", {"/redfish/v1/Managers/BMC"}}});
    INFO(r.body);
    REQUIRE(r.status == 202);
    const std::string monitor = r.header("Location");
    CHECK(bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", token}}).status == 202);
    bmc.wall.t += 10.5;  // done 0.5 s ago; the restart takes 2 s
    auto restarting = bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", token}});
    CHECK(restarting.status == 503);
    CHECK(restarting.header("Retry-After") == "2");
    CHECK(error_id(restarting) == "Base.1.8.ServiceTemporarilyUnavailable");
    bmc.wall.t += 2;
    CHECK(bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", token}}).status == 401);
    CHECK(body_of(bmc.call("GET", monitor))["TaskState"] == "Completed");
    CHECK(bmc.get("/redfish/v1/Managers/BMC")["FirmwareVersion"] == "7.10");
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/BMC")["Version"] == "7.10");
    CHECK(bmc.state->session_count() == 0);
}

TEST_CASE("bmc update OnReset stages the version until the next reset") {
    Bmc bmc(kDmtf);
    auto r = bmc.push(test::kiln_image("BIOS", "2.5.0"),
                      {{"Targets", json::array()}, {"@Redfish.OperationApplyTime", "OnReset"}});
    REQUIRE(r.status == 202);
    bmc.wall.t += 10;
    const json task = body_of(bmc.call("GET", r.header("Location")));
    CHECK(task["TaskState"] == "Completed");
    CHECK(message_ids(task).find("Update.1.0.AwaitToActivate") != std::string::npos);
    CHECK(bmc.get(kSystem)["BiosVersion"] == "P79 v1.45 (12/06/2017)");
    auto state = body_of(bmc.state->handle(request("GET", "/kiln-bmc/state")));
    CHECK(state["pending_updates"].size() == 1);
    CHECK(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status == 204);
    CHECK(bmc.get(kSystem)["BiosVersion"] == "2.5.0");
    CHECK(bmc.get("/redfish/v1/UpdateService/FirmwareInventory/BIOS")["Version"] == "2.5.0");
    state = body_of(bmc.state->handle(request("GET", "/kiln-bmc/state")));
    CHECK(state["pending_updates"].empty());
    CHECK(state["updates"].size() == 1);
}

TEST_CASE("bmc update tasks fail with named messages") {
    test::ImageServer images({{"/junk.bin", "MZ not a kiln image"}, {"/bmc.bin", test::kiln_image("BMC", "9")}});
    Bmc bmc(kDmtf);
    auto run = [&](const json& params) {
        auto r = bmc.call("POST", kSimpleUpdate, params);
        INFO(r.body);
        REQUIRE(r.status == 202);
        bmc.state->wait_downloads();
        bmc.wall.t += 10;
        auto t = bmc.call("GET", r.header("Location"));
        CHECK(t.status == 200);
        return body_of(t);
    };
    SECTION("the image server answers 404") {
        const json t = run({{"ImageURI", images.url("/missing.bin")}});
        CHECK(t["TaskState"] == "Exception");
        CHECK(t["TaskStatus"] == "Critical");
        CHECK(message_ids(t).find("Update.1.0.TransferFailed") != std::string::npos);
        CHECK(t["Messages"][0]["Message"].get<std::string>().find("404") != std::string::npos);
    }
    SECTION("the image is not a kiln image") {
        const json t = run({{"ImageURI", images.url("/junk.bin")}});
        CHECK(t["TaskState"] == "Exception");
        CHECK(message_ids(t).find("Update.1.0.VerificationFailed") != std::string::npos);
    }
    SECTION("the image does not fit the target") {
        const json t = run(
            {{"ImageURI", images.url("/bmc.bin")}, {"Targets", {"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}}});
        CHECK(t["TaskState"] == "Exception");
        CHECK(message_ids(t).find("Update.1.0.ApplyFailed") != std::string::npos);
        CHECK(bmc.get("/redfish/v1/Managers/BMC")["FirmwareVersion"] == "1.45.455b66-rev4");
    }
    SECTION("nothing listens at the image URI") {
        const json t = run({{"ImageURI", "http://127.0.0.1:1/x.bin"}});
        CHECK(t["TaskState"] == "Exception");
        CHECK(message_ids(t).find("Update.1.0.TransferFailed") != std::string::npos);
    }
}

TEST_CASE("bmc update SimpleUpdate refuses bad parameters with 400") {
    Bmc bmc(kDmtf);
    auto id = [&](const json& params) {
        auto r = bmc.call("POST", kSimpleUpdate, params);
        CHECK(r.status == 400);
        return error_id(r);
    };
    CHECK(id(json::object()) == "Base.1.8.ActionParameterMissing");
    CHECK(id({{"ImageURI", 7}}) == "Base.1.8.ActionParameterValueFormatError");
    CHECK(id({{"ImageURI", "ftp://host/x"}}) == "Base.1.8.ActionParameterValueFormatError");
    CHECK(id({{"ImageURI", "http://h/x"}, {"TransferProtocol", "GOPHER"}}) == "Base.1.8.ActionParameterValueNotInList");
    CHECK(id({{"ImageURI", "h/x"}, {"TransferProtocol", "TFTP"}}) == "Base.1.8.ActionParameterNotSupported");
    CHECK(id({{"ImageURI", "http://h/x"}, {"TransferProtocol", "HTTPS"}}) == "Base.1.8.ActionParameterValueNotInList");
    CHECK(id({{"ImageURI", "http://h/x"}, {"Bogus", 1}}) == "Base.1.8.ActionParameterNotSupported");
    CHECK(id({{"ImageURI", "http://h/x"}, {"Targets", "/redfish/v1/Systems/1"}}) ==
          "Base.1.8.ActionParameterValueFormatError");
    CHECK(id({{"ImageURI", "http://h/x"}, {"Targets", {"/redfish/v1/NoSuch"}}}) ==
          "Base.1.8.ActionParameterValueNotInList");
    CHECK(id({{"ImageURI", "http://h/x"}, {"@Redfish.OperationApplyTime", "Later"}}) ==
          "Base.1.8.ActionParameterValueNotInList");
    // Unauthenticated: 401 before anything is looked at.
    CHECK(bmc.state->handle(request("POST", kSimpleUpdate, R"({"ImageURI": "http://h/x"})")).status == 401);
}

TEST_CASE("bmc update multipart push without UpdateFile or as plain JSON is refused") {
    Bmc bmc(kDmtf);
    BmcRequest r = request("POST", kPush, "", {{"Authorization", test::basic_auth("admin", test::kPassword)}});
    r.multipart = MultipartBody{};
    auto missing = bmc.state->handle(r);
    CHECK(missing.status == 400);
    CHECK(error_id(missing) == "Base.1.8.ActionParameterMissing");
    auto plain = bmc.call("POST", kPush, {{"Targets", json::array()}});
    CHECK(plain.status == 415);
    auto bad_params = bmc.push(test::kiln_image("BIOS", "1"), nullptr);
    CHECK(bad_params.status == 202);  // UpdateParameters may be left out
    CHECK(files_in(bmc.spool.path()) == 0);
    CHECK(bmc.state->admit_upload("POST", kPush, {}).value().status == 401);
    CHECK_FALSE(
        bmc.state->admit_upload("POST", kPush, {{"Authorization", test::basic_auth("admin", test::kPassword)}}));
    CHECK(bmc.state->admit_upload("POST", "/redfish/v1/Systems", {}).value().status == 415);
}

TEST_CASE("bmc update tasks and staged updates survive a restart of the emulator") {
    ScratchDir dir;
    const std::string file = dir.file("bmc.json");
    std::string monitor, staged_monitor;
    FakeWall later;
    {
        Bmc bmc(kDmtf, file);
        auto r = bmc.push(test::kiln_image("BIOS", "3.0"), {{"@Redfish.OperationApplyTime", "OnReset"}});
        REQUIRE(r.status == 202);
        staged_monitor = r.header("Location");
        bmc.wall.t += 10;
        CHECK(bmc.call("GET", staged_monitor).status == 200);
        auto running = bmc.push(test::kiln_image("BMC", "8.0"), json::object());
        REQUIRE(running.status == 202);
        monitor = running.header("Location");
        later.t = bmc.wall.t + 13;  // done, and past the BMC's restart
    }
    Bmc again(kDmtf, file);
    again.wall = later;
    CHECK(body_of(again.call("GET", staged_monitor))["TaskState"] == "Completed");
    auto done = again.call("GET", monitor);
    CHECK(body_of(done)["TaskState"] == "Completed");
    CHECK(again.get("/redfish/v1/Managers/BMC")["FirmwareVersion"] == "8.0");
    again.wall.t += 5;
    CHECK(again.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status == 204);
    CHECK(again.get(kSystem)["BiosVersion"] == "3.0");
}

TEST_CASE("bmc update a download cut by an emulator restart ends in Exception") {
    ScratchDir dir;
    const std::string file = dir.file("bmc.json");
    std::string monitor;
    {
        // A server that accepts and never answers: the download hangs until shutdown.
        int s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        REQUIRE(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(listen(s, 4) == 0);
        getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
        Bmc bmc(kDmtf, file);
        auto r = bmc.call("POST", kSimpleUpdate,
                          {{"ImageURI", "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/slow.bin"}});
        REQUIRE(r.status == 202);
        monitor = r.header("Location");
        bmc.state.reset();  // cancels the download
        close(s);
    }
    Bmc again(kDmtf, file);
    auto t = body_of(again.call("GET", monitor));
    CHECK(t["TaskState"] == "Exception");
    CHECK(message_ids(t).find("Update.1.0.TransferFailed") != std::string::npos);
}

TEST_CASE("bmc fault fail_tasks ends the next task in Exception and leaves the version") {
    FaultSettings f;
    f.fail_tasks = 1;
    Bmc bmc(kDmtf, "", f);
    auto r = bmc.push(test::kiln_image("BIOS", "9.9"), json::object());
    REQUIRE(r.status == 202);
    bmc.wall.t += 10;
    const json t = body_of(bmc.call("GET", r.header("Location")));
    CHECK(t["TaskState"] == "Exception");
    CHECK(t["TaskStatus"] == "Critical");
    CHECK(message_ids(t).find("Update.1.0.ApplyFailed") != std::string::npos);
    CHECK(bmc.get(kSystem)["BiosVersion"] == "P79 v1.45 (12/06/2017)");
    // The fault fired once: the retry succeeds.
    auto again = bmc.push(test::kiln_image("BIOS", "9.9"), json::object());
    bmc.wall.t += 10;
    CHECK(body_of(bmc.call("GET", again.header("Location")))["TaskState"] == "Completed");
    CHECK(bmc.get(kSystem)["BiosVersion"] == "9.9");
}

TEST_CASE("bmc fault restart_mid_update ends the sessions half way and the task still completes") {
    Bmc bmc(kDmtf);
    REQUIRE(bmc.state->handle(request("PATCH", "/kiln-bmc/faults", R"({"restart_mid_update": 1})")).status == 200);
    const std::string token = bmc.login();
    auto r = bmc.push(test::kiln_image("BIOS", "4.0"), json::object(), {{"X-Auth-Token", token}});
    REQUIRE(r.status == 202);
    const std::string monitor = r.header("Location");
    bmc.wall.t += 4;
    CHECK(bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", token}}).status == 202);
    bmc.wall.t += 1.5;  // 55 %: the restart began at 50 %
    CHECK(bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", token}}).status == 503);
    bmc.wall.t += 2;
    CHECK(bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", token}}).status == 401);
    const std::string fresh = bmc.login();
    auto running = bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", fresh}});
    CHECK(running.status == 202);
    CHECK(body_of(running)["TaskState"] == "Running");
    bmc.wall.t += 5;
    CHECK(body_of(bmc.call("GET", monitor, nullptr, {{"X-Auth-Token", fresh}}))["TaskState"] == "Completed");
    CHECK(bmc.get(kSystem)["BiosVersion"] == "4.0");
}

TEST_CASE("bmc fault unavailable answers 503 with Retry-After for N requests, drop closes N connections") {
    Bmc bmc(kDmtf);
    auto set = bmc.state->handle(request("PATCH", "/kiln-bmc/faults",
                                         R"({"unavailable_requests": 2, "retry_after_s": 7, "drop_connections": 1})"));
    REQUIRE(set.status == 200);
    CHECK(body_of(set)["unavailable_requests"] == 2);
    auto dropped = bmc.call("GET", kSystem);
    CHECK(dropped.drop_connection);
    for (int i = 0; i < 2; ++i) {
        auto r = bmc.call("GET", kSystem);
        CHECK(r.status == 503);
        CHECK(r.header("Retry-After") == "7");
        CHECK(error_id(r) == "Base.1.8.ServiceTemporarilyUnavailable");
    }
    CHECK(bmc.call("GET", kSystem).status == 200);
    // The control endpoint itself is never faulted.
    auto now = body_of(bmc.state->handle(request("GET", "/kiln-bmc/faults")));
    CHECK(now["unavailable_requests"] == 0);
    CHECK(now["drop_connections"] == 0);
}

TEST_CASE("bmc fault latency delays each request by at least the set time") {
    FaultSettings f;
    f.latency_ms = 150;
    Bmc bmc(kDmtf, "", f);
    const auto start = std::chrono::steady_clock::now();
    CHECK(bmc.call("GET", kSystem).status == 200);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(150));
    CHECK(bmc.state->handle(request("DELETE", "/kiln-bmc/faults")).status == 200);
    CHECK(body_of(bmc.state->handle(request("GET", "/kiln-bmc/faults")))["latency_ms"] == 0);
}

TEST_CASE("bmc fault session_limit set at run time caps logins") {
    Bmc bmc(kDmtf);
    REQUIRE(bmc.state->handle(request("PATCH", "/kiln-bmc/faults", R"({"session_limit": 1})")).status == 200);
    bmc.login();
    auto refused = bmc.state->handle(request("POST", "/redfish/v1/SessionService/Sessions",
                                             json{{"UserName", "admin"}, {"Password", test::kPassword}}.dump()));
    CHECK(refused.status == 503);
    CHECK(error_id(refused) == "IDRAC.2.8.RAC0218");
    REQUIRE(bmc.state->handle(request("DELETE", "/kiln-bmc/faults")).status == 200);
    bmc.login();
}

TEST_CASE("bmc fault control endpoint refuses unknown fields and wrong types") {
    Bmc bmc(kDmtf);
    auto unknown = bmc.state->handle(request("PATCH", "/kiln-bmc/faults", R"({"latency": 5})"));
    CHECK(unknown.status == 400);
    CHECK(unknown.body.find("latency") != std::string::npos);
    CHECK(bmc.state->handle(request("PATCH", "/kiln-bmc/faults", R"({"fail_tasks": -1})")).status == 400);
    CHECK(bmc.state->handle(request("PATCH", "/kiln-bmc/faults", R"({"fail_tasks": "1"})")).status == 400);
    CHECK(bmc.state->handle(request("GET", "/kiln-bmc/nothing")).status == 404);
    CHECK(body_of(bmc.state->handle(request("GET", "/kiln-bmc/faults")))["fail_tasks"] == 0);
}

TEST_CASE("bmc virtual media insert, boot override Cd and a reset boot the inserted image") {
    Bmc bmc(kDmtf);
    const std::string cd = kSystem + "/VirtualMedia/CD1";
    const json media = bmc.get(cd);
    REQUIRE(media["Actions"].contains("#VirtualMedia.InsertMedia"));
    const std::string insert = media["Actions"]["#VirtualMedia.InsertMedia"]["target"];
    const std::string eject = media["Actions"]["#VirtualMedia.EjectMedia"]["target"];
    CHECK(bmc.call("POST", eject, json::object()).status == 204);
    CHECK(bmc.get(cd)["Inserted"] == false);
    auto bad = bmc.call("POST", insert, {{"Inserted", true}});
    CHECK(bad.status == 400);
    CHECK(error_id(bad) == "Base.1.8.ActionParameterMissing");
    CHECK(bmc.call("POST", insert, {{"Image", "http://127.0.0.1:9/os.iso?token=s3cret"}, {"Inserted", "yes"}}).status ==
          400);
    REQUIRE(
        bmc.call("POST", insert,
                 {{"Image", "http://127.0.0.1:9/os.iso?token=s3cret"}, {"Inserted", true}, {"WriteProtected", true}})
            .status == 204);
    const json inserted = bmc.get(cd);
    CHECK(inserted["Inserted"] == true);
    CHECK(inserted["WriteProtected"] == true);
    CHECK(inserted["Image"] == "http://127.0.0.1:9/os.iso");  // no query kept
    CHECK(inserted["ImageName"] == "os.iso");

    auto bad_target = bmc.call("PATCH", kSystem, {{"Boot", {{"BootSourceOverrideTarget", "Floppy"}}}});
    CHECK(bad_target.status == 400);
    CHECK(error_id(bad_target) == "Base.1.8.PropertyValueNotInList");
    auto bad_enabled = bmc.call("PATCH", kSystem, {{"Boot", {{"BootSourceOverrideEnabled", "Always"}}}});
    CHECK(bad_enabled.status == 400);
    CHECK(bmc.call("PATCH", kSystem,
                   {{"Boot", {{"BootSourceOverrideTarget", "Cd"}, {"BootSourceOverrideEnabled", "Once"}}}})
              .status == 200);
    CHECK(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status == 204);
    auto state = body_of(bmc.state->handle(request("GET", "/kiln-bmc/state")));
    CHECK(state["last_boot"]["source"] == "Cd");
    CHECK(state["last_boot"]["media"]["image"] == "http://127.0.0.1:9/os.iso");
    CHECK(bmc.get(kSystem)["Boot"]["BootSourceOverrideEnabled"] == "Disabled");  // used up
}

TEST_CASE("bmc virtual media on the HPE manager") {
    Bmc bmc(kHpe);
    const std::string vm = "/redfish/v1/Managers/1/VirtualMedia/2";
    REQUIRE(
        bmc.call("POST", vm + "/Actions/VirtualMedia.InsertMedia", {{"Image", "http://127.0.0.1:9/a.iso"}}).status ==
        204);
    CHECK(bmc.get(vm)["Inserted"] == true);
    CHECK(bmc.call("POST", vm + "/Actions/VirtualMedia.EjectMedia", json::object()).status == 204);
    CHECK(bmc.get(vm)["Inserted"] == false);
    CHECK(bmc.get(vm)["Image"] == "");
}

// Vendor modes (vendor_mode.h): each takes away what that vendor lacks.

TEST_CASE("bmc vendor dell: a BIOS update waits Scheduled in the job queue until a host reset runs it") {
    Bmc bmc(kDmtf, "", {}, 10, VendorMode::Dell);
    CHECK(bmc.get("/redfish/v1")["Vendor"] == "Dell");
    auto accepted = bmc.push("KILN-FW BIOS P79 v1.50\nimage",
                             {{"Targets", json::array({"/redfish/v1/UpdateService/FirmwareInventory/BIOS"})}});
    REQUIRE(accepted.status == 202);
    const std::string monitor = accepted.header("Location");
    const std::string id = body_of(accepted)["Id"];
    REQUIRE(id.rfind("JID_", 0) == 0);
    const std::string job = "/redfish/v1/Managers/BMC/Oem/Dell/Jobs/" + id;
    bmc.wall.t += 11;  // the task's time is up: Immediate asked, yet it waits for the host
    auto waiting = bmc.call("GET", monitor);
    CHECK(waiting.status == 202);
    CHECK(body_of(waiting)["TaskState"] == "Running");
    CHECK(body_of(waiting)["Oem"]["Dell"]["JobState"] == "Scheduled");
    CHECK(bmc.get(job)["JobState"] == "Scheduled");
    CHECK(bmc.get(kSystem)["BiosVersion"] == "P79 v1.45 (12/06/2017)");
    CHECK(bmc.get("/redfish/v1/Managers/BMC/Oem/Dell/Jobs")["Members"].size() == 1);

    REQUIRE(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status == 204);
    CHECK(bmc.get(job)["JobState"] == "Completed");
    CHECK(bmc.get(job)["Message"] == "Job completed successfully.");
    auto done = bmc.call("GET", monitor);
    CHECK(done.status == 200);
    CHECK(body_of(done)["TaskState"] == "Completed");
    CHECK(bmc.get(kSystem)["BiosVersion"] == "P79 v1.50");
    CHECK(bmc.call("GET", "/redfish/v1/Managers/BMC/Oem/Dell/Jobs/JID_999").status == 404);
}

TEST_CASE("bmc vendor dell: clearing the job queue cancels an update waiting for the host reset") {
    Bmc bmc(kDmtf, "", {}, 10, VendorMode::Dell);
    const std::string clear = "/redfish/v1/Managers/BMC/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue";
    const std::string jobs = "/redfish/v1/Managers/BMC/Oem/Dell/Jobs";
    auto accepted = bmc.push("KILN-FW BIOS P79 v1.50\nimage",
                             {{"Targets", json::array({"/redfish/v1/UpdateService/FirmwareInventory/BIOS"})}});
    REQUIRE(accepted.status == 202);
    const std::string id = body_of(accepted)["Id"];
    bmc.wall.t += 11;
    REQUIRE(bmc.get(jobs + "/" + id)["JobState"] == "Scheduled");

    CHECK(bmc.call("POST", clear, json::object()).status == 400);             // no JobID
    CHECK(bmc.call("POST", clear, {{"JobID", "JID_424242"}}).status == 400);  // no such job
    CHECK(bmc.get(jobs)["Members"].size() == 1);                              // a refusal deletes nothing
    REQUIRE(bmc.call("POST", clear, {{"JobID", "JID_CLEARALL"}}).status == 200);
    CHECK(bmc.get(jobs)["Members"].empty());
    CHECK(bmc.call("GET", jobs + "/" + id).status == 404);
    // The reset that would have run it finds nothing to apply.
    REQUIRE(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status == 204);
    CHECK(bmc.get(kSystem)["BiosVersion"] == "P79 v1.45 (12/06/2017)");
}

TEST_CASE("bmc vendor dell: deleting one job by its id leaves the others") {
    Bmc bmc(kDmtf, "", {}, 10, VendorMode::Dell);
    const std::string clear = "/redfish/v1/Managers/BMC/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue";
    const std::string jobs = "/redfish/v1/Managers/BMC/Oem/Dell/Jobs";
    auto first = bmc.push("KILN-FW BIOS P79 v1.50\nimage",
                          {{"Targets", json::array({"/redfish/v1/UpdateService/FirmwareInventory/BIOS"})}});
    auto second = bmc.push("KILN-FW BIOS P79 v1.51\nimage",
                           {{"Targets", json::array({"/redfish/v1/UpdateService/FirmwareInventory/BIOS"})}});
    REQUIRE(first.status == 202);
    REQUIRE(second.status == 202);
    bmc.wall.t += 11;
    REQUIRE(bmc.call("POST", clear, {{"JobID", body_of(first)["Id"]}}).status == 200);
    const auto members = bmc.get(jobs)["Members"];
    REQUIRE(members.size() == 1);
    CHECK(members[0]["@odata.id"] == jobs + "/" + body_of(second)["Id"].get<std::string>());
    REQUIRE(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status == 204);
    CHECK(bmc.get(kSystem)["BiosVersion"] == "P79 v1.51");
}

TEST_CASE("bmc fault purge_tasks: the task answers once, then 404") {
    FaultSettings f;
    f.purge_tasks = 1;
    Bmc bmc(kDmtf, "", f, 10);
    auto accepted = bmc.push("KILN-FW BIOS P79 v1.50\nimage", nullptr);
    REQUIRE(accepted.status == 202);
    const std::string monitor = accepted.header("Location");
    CHECK(bmc.call("GET", monitor).status == 202);  // the answer to the POST is not a poll
    CHECK(bmc.call("GET", monitor).status == 404);
    CHECK(bmc.state->faults().current().purge_tasks == 0);
}

TEST_CASE("bmc vendor openbmc refuses SimpleUpdate with ActionParameterNotSupported") {
    Bmc bmc(kDmtf, "", {}, 10, VendorMode::OpenBmc);
    auto r = bmc.call("POST", kSimpleUpdate, {{"ImageURI", "http://127.0.0.1:1/x.bin"}, {"TransferProtocol", "HTTP"}});
    CHECK(r.status == 400);
    CHECK(error_id(r).find("ActionParameterNotSupported") != std::string::npos);
    CHECK(bmc.push("KILN-FW BIOS P79 v1.50\nimage", nullptr).status == 202);  // the multipart push is the way
}

TEST_CASE("bmc vendor lenovo and ami: where the BIOS settings go") {
    const std::string bios = kSystem + "/Bios";
    const json change = {{"Attributes", {{"ProcHyperthreading", "Disabled"}}}};
    SECTION("lenovo: <Bios>/Pending, the Bios itself is read-only") {
        Bmc bmc(kDmtf, "", {}, 10, VendorMode::Lenovo);
        CHECK_FALSE(bmc.get(bios).contains("@Redfish.Settings"));
        CHECK(bmc.call("PATCH", bios, change).status == 405);
        CHECK(bmc.call("PATCH", bios + "/Settings", change).status == 404);
        REQUIRE(bmc.call("PATCH", bios + "/Pending", change).status == 200);
        CHECK(bmc.get(bios)["Attributes"]["ProcHyperthreading"] == "Enabled");  // pending until the reset
        REQUIRE(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status ==
                204);
        CHECK(bmc.get(bios)["Attributes"]["ProcHyperthreading"] == "Disabled");
    }
    SECTION("ami: no settings object, the Bios takes the PATCH and the next POST applies it") {
        Bmc bmc(kDmtf, "", {}, 10, VendorMode::Ami);
        CHECK_FALSE(bmc.get(bios).contains("@Redfish.Settings"));
        CHECK(bmc.call("PATCH", bios + "/Settings", change).status == 404);
        REQUIRE(bmc.call("PATCH", bios, change).status == 200);
        CHECK(bmc.get(bios)["Attributes"]["ProcHyperthreading"] == "Enabled");  // until the reset
        // A misspelt attribute is refused there and then, as with a settings object.
        CHECK(bmc.call("PATCH", bios, {{"Attributes", {{"ProcHyperthreadding", "Disabled"}}}}).status == 400);
        REQUIRE(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status ==
                204);
        CHECK(bmc.get(bios)["Attributes"]["ProcHyperthreading"] == "Disabled");
        // Applied once: a second reset changes nothing more.
        REQUIRE(bmc.call("POST", kSystem + "/Actions/ComputerSystem.Reset", {{"ResetType", "ForceRestart"}}).status ==
                204);
        CHECK(bmc.get(bios)["Attributes"]["ProcHyperthreading"] == "Disabled");
    }
}

TEST_CASE("bmc vendor hpe keeps iLO's version form, and modes are read from the tree") {
    CHECK(in_vendor_form(VendorMode::Hpe, "iLO 5 v2.70", "2.72") == "iLO 5 v2.72");
    CHECK(in_vendor_form(VendorMode::Hpe, "A43 v2.52 (10/29/2021)", "2.60") == "A43 v2.60");
    CHECK(in_vendor_form(VendorMode::Hpe, "iLO 5 v2.70", "iLO 5 v2.72") == "iLO 5 v2.72");
    CHECK(in_vendor_form(VendorMode::Hpe, "1.0", "2.0") == "2.0");
    CHECK(in_vendor_form(VendorMode::Dell, "iLO 5 v2.70", "2.72") == "2.72");
    CHECK(infer_vendor_mode(test::mockup(kHpe)) == VendorMode::Hpe);
    CHECK(infer_vendor_mode(test::mockup(kDmtf)) == VendorMode::Generic);
    CHECK(vendor_mode_from_name("openbmc") == VendorMode::OpenBmc);
    CHECK_FALSE(vendor_mode_from_name("contoso"));
}

TEST_CASE("bmc a member related to no system sets the BiosVersion of no system behind a multi-node BMC") {
    MockupTree tree;
    auto system = [](const std::string& id) {
        return json{{"@odata.id", "/redfish/v1/Systems/" + id},
                    {"@odata.type", "#ComputerSystem.v1_5_0.ComputerSystem"},
                    {"Id", id},
                    {"BiosVersion", "1.0"}};
    };
    tree.resources["/redfish/v1"] = {{"@odata.id", "/redfish/v1"}};
    tree.resources["/redfish/v1/Systems/Node0"] = system("Node0");
    tree.resources["/redfish/v1/Systems/Node1"] = system("Node1");
    tree.resources["/redfish/v1/UpdateService/FirmwareInventory/BIOS"] = {
        {"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory/BIOS"}, {"Id", "BIOS"}, {"Version", "1.0"}};
    tree.resources["/redfish/v1/Systems"] = {
        {"Members", {{{"@odata.id", "/redfish/v1/Systems/Node0"}}, {{"@odata.id", "/redfish/v1/Systems/Node1"}}}}};
    ResourceStore blades(tree);
    CHECK(apply_version(blades, "/redfish/v1/UpdateService/FirmwareInventory/BIOS", "2.0").bodies.size() == 1);
    tree.resources["/redfish/v1/Systems"]["Members"].erase(1);
    ResourceStore single(tree);
    auto one = apply_version(single, "/redfish/v1/UpdateService/FirmwareInventory/BIOS", "2.0");
    REQUIRE(one.bodies.size() == 2);
    CHECK(one.bodies[1].first == "/redfish/v1/Systems/Node0");
}
