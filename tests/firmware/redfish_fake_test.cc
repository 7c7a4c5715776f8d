// The Redfish client against a scripted BMC (fake_bmc.h): sessions, 401,
// 412, busy retries, redirects, bad bodies, task states.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "firmware/redfish/redfish_client.h"
#include "firmware/redfish/redfish_json.h"
#include "firmware/redfish/session_pool.h"
#include "firmware/redfish/task_monitor.h"
#include "firmware/stage/bmc_inventory.h"
#include "tests/firmware/fake_bmc.h"

using namespace kiln;
using namespace kiln::redfish;
using kiln::firmware::test::FakeBmc;
using kiln::firmware::test::json_reply;
using kiln::firmware::test::Reply;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

Endpoint endpoint() {
    return Endpoint{"http://bmc.test:8000", "admin", "s3cret-pw", {}};
}

// Records every wait instead of sleeping.
struct Waits {
    std::vector<milliseconds> seen;
    Waiter waiter() {
        return [this](milliseconds d) {
            seen.push_back(d);
            return true;
        };
    }
};

std::string header_of(const net::HttpRequest& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
        if (k == name) return v;
    return "";
}

}  // namespace

TEST_CASE("parse_json refuses garbage deep nesting and oversized bodies naming the source") {
    auto bad = parse_json("{\"a\": [1, 2", "GET /redfish/v1/Systems");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().code == "redfish.json");
    CHECK(bad.error().message.find("GET /redfish/v1/Systems") != std::string::npos);

    std::string deep(200, '[');
    deep += std::string(200, ']');
    auto d = parse_json(deep, "GET /x");
    REQUIRE_FALSE(d);
    CHECK(d.error().message.find("nested deeper") != std::string::npos);

    JsonLimits small{.max_bytes = 10};
    auto big = parse_json("{\"a\": \"0123456789\"}", "GET /y", small);
    REQUIRE_FALSE(big);
    CHECK(big.error().message.find("limit") != std::string::npos);

    // Brackets inside strings do not count as nesting.
    CHECK(parse_json("{\"a\": \"" + std::string(100, '[') + "\"}", "GET /z"));
}

TEST_CASE("typed reads name the resource and field of a missing link or a wrong type") {
    json doc = {{"Systems", {{"@odata.id", 5}}}, {"Name", "root"}, {"Bios", {{"x", 1}}}};
    JsonView v(doc, "GET /redfish/v1");
    auto sys = v.link("Systems");
    REQUIRE_FALSE(sys);
    CHECK(sys.error().code == "redfish.type");
    CHECK(sys.error().message == "GET /redfish/v1: /Systems/@odata.id: expected a string, got an integer");
    auto mgr = v.link("Managers");
    REQUIRE_FALSE(mgr);
    CHECK(mgr.error().code == "redfish.missing");
    CHECK(mgr.error().message == "GET /redfish/v1: /Managers: missing");
    auto bios = v.link("Bios");
    REQUIRE_FALSE(bios);
    CHECK(bios.error().message.find("/Bios/@odata.id: missing") != std::string::npos);
    auto members = v.members();
    REQUIRE_FALSE(members);
    CHECK(members.error().code == "redfish.missing");
    CHECK(v.opt_link("Managers").value().empty());
}

TEST_CASE("one session is opened reused for every request and logged out when the pool goes") {
    FakeBmc bmc;
    bmc.minimal_tree();
    {
        SessionPool pool(bmc);
        Client a(pool.acquire(endpoint()));
        Client b(pool.acquire(endpoint()));
        REQUIRE(a.get("/redfish/v1/Systems"));
        REQUIRE(b.get("/redfish/v1/Managers"));
        REQUIRE(a.get("/redfish/v1/Systems/S1"));
        CHECK(bmc.count("POST", "/redfish/v1/SessionService/Sessions") == 1);
        for (const auto& r : bmc.requests())
            if (r.method == "GET" && r.url.find("/Systems") != std::string::npos)
                CHECK(header_of(r, "X-Auth-Token") == "tok-secret-1");
        CHECK(bmc.count("DELETE", "/redfish/v1/SessionService/Sessions/1") == 0);
    }
    CHECK(bmc.count("DELETE", "/redfish/v1/SessionService/Sessions/1") == 1);
}

TEST_CASE("a 401 drops the session logs in once more and retries and a second 401 is the answer") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on("POST", "/redfish/v1/SessionService/Sessions",
           {json_reply({}, 201, {{"X-Auth-Token", "tok-a"}, {"Location", "/redfish/v1/SessionService/Sessions/1"}}),
            json_reply({}, 201, {{"X-Auth-Token", "tok-b"}, {"Location", "/redfish/v1/SessionService/Sessions/1"}})});
    bmc.on("GET", "/redfish/v1/Systems", {json_reply({}, 401), json_reply({{"Members", json::array()}})});
    auto session = std::make_shared<BmcSession>(bmc, endpoint());
    Client c(session);
    auto r = c.get("/redfish/v1/Systems");
    REQUIRE(r);
    CHECK(bmc.count("POST", "/redfish/v1/SessionService/Sessions") == 2);
    CHECK(header_of(bmc.requests().back(), "X-Auth-Token") == "tok-b");

    bmc.on("GET", "/redfish/v1/Managers", json_reply({}, 401));
    auto m = c.get("/redfish/v1/Managers");
    REQUIRE_FALSE(m);
    CHECK(m.error().message.find("HTTP 401") != std::string::npos);
    CHECK(bmc.count("POST", "/redfish/v1/SessionService/Sessions") == 3);  // once per request, not a loop
}

TEST_CASE("Basic auth when the service root offers no sessions") {
    FakeBmc bmc;
    bmc.on("GET", "/redfish/v1/", json_reply({{"Systems", {{"@odata.id", "/redfish/v1/Systems"}}}}));
    bmc.on("GET", "/redfish/v1/Systems", json_reply({{"Members", json::array()}}));
    auto session = std::make_shared<BmcSession>(bmc, endpoint());
    Client c(session);
    REQUIRE(c.get("/redfish/v1/Systems"));
    CHECK(bmc.count("POST", "/redfish/v1/SessionService/Sessions") == 0);
    CHECK(bmc.requests().back().basic_user == "admin");
    CHECK(session->stats().basic_auth);
}

TEST_CASE("a 412 re-reads the resource and retries the PATCH once with the fresh ETag") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on(
        "GET", "/redfish/v1/Systems/S1",
        {json_reply({{"Id", "S1"}}, 200, {{"ETag", "\"A\""}}), json_reply({{"Id", "S1"}}, 200, {{"ETag", "\"B\""}})});
    bmc.on("PATCH", "/redfish/v1/Systems/S1", {json_reply({}, 412), Reply{204, "", {}, ""}});
    Client c(std::make_shared<BmcSession>(bmc, endpoint()));
    auto r = c.patch("/redfish/v1/Systems/S1", json{{"AssetTag", "x"}});
    REQUIRE(r);
    CHECK(r->status == 204);
    std::vector<std::string> if_match;
    for (const auto& q : bmc.requests())
        if (q.method == "PATCH") if_match.push_back(header_of(q, "If-Match"));
    CHECK(if_match == std::vector<std::string>{"\"A\"", "\"B\""});

    // Twice 412: the second is the answer, not a loop.
    bmc.on("PATCH", "/redfish/v1/Systems/S1", json_reply({}, 412));
    auto again = c.patch("/redfish/v1/Systems/S1", json{{"AssetTag", "y"}}, "\"stale\"");
    REQUIRE(again);
    CHECK(again->status == 412);
}

TEST_CASE("busy replies are retried with the BMC's Retry-After and retries are bounded") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on("GET", "/redfish/v1/Systems",
           {json_reply({}, 503, {{"Retry-After", "7"}}), json_reply({{"Members", json::array()}})});
    Waits waits;
    SessionOptions opts;
    opts.max_attempts = 3;
    Client c(std::make_shared<BmcSession>(bmc, endpoint(), opts), waits.waiter());
    REQUIRE(c.get("/redfish/v1/Systems"));
    REQUIRE(waits.seen.size() == 1);
    CHECK(waits.seen[0] == milliseconds(7000));

    // A vendor "busy" MessageId on a 400 counts as busy too.
    bmc.on("GET", "/redfish/v1/Managers",
           json_reply(
               {{"error", {{"@Message.ExtendedInfo", {{{"MessageId", "Base.1.8.ServiceTemporarilyUnavailable"}}}}}}},
               400));
    auto m = c.get("/redfish/v1/Managers");
    REQUIRE_FALSE(m);
    CHECK(bmc.count("GET", "/redfish/v1/Managers") == 3);
    CHECK(m.error().message.find("ServiceTemporarilyUnavailable") != std::string::npos);

    // A stop during the wait ends the request at once.
    bmc.on("GET", "/redfish/v1/Chassis", json_reply({}, 503));
    Client stopped(std::make_shared<BmcSession>(bmc, endpoint(), opts), [](milliseconds) { return false; });
    auto s = stopped.get("/redfish/v1/Chassis");
    REQUIRE_FALSE(s);
    CHECK(s.error().code == "redfish.stopped");
}

TEST_CASE("an action POST is resent after a refused connection but never after a timeout") {
    FakeBmc bmc;
    bmc.minimal_tree();
    Waits waits;
    Client c(std::make_shared<BmcSession>(bmc, endpoint()), waits.waiter());
    REQUIRE(c.get("/redfish/v1/Systems"));  // logged in
    bmc.on("POST", "/a", {Reply{0, "", {}, "http.timeout"}, json_reply({}, 202)});
    auto t = c.post("/a", json::object());
    REQUIRE_FALSE(t);
    CHECK(t.error().code == "http.timeout");
    CHECK(bmc.count("POST", "/a") == 1);

    bmc.on("POST", "/b", {Reply{0, "", {}, "http.connect"}, json_reply({}, 202)});
    auto ok = c.post("/b", json::object());
    REQUIRE(ok);
    CHECK(ok->status == 202);
    CHECK(bmc.count("POST", "/b") == 2);
}

TEST_CASE("redirects and links to another host are refused with a clear error") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on("GET", "/redfish/v1/Systems",
           Reply{302, "", {{"Location", "http://elsewhere.test/redfish/v1/Systems"}}, ""});
    Client c(std::make_shared<BmcSession>(bmc, endpoint()));
    auto r = c.get("/redfish/v1/Systems");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "redfish.redirect");
    CHECK(r.error().message.find("elsewhere.test") != std::string::npos);
    CHECK(bmc.count("GET", "/redfish/v1/Systems") == 1);
    auto link = c.get("http://elsewhere.test/redfish/v1/Systems/1");
    REQUIRE_FALSE(link);
    CHECK(link.error().code == "redfish.redirect");
    for (const auto& q : bmc.requests()) CHECK(q.url.find("elsewhere") == std::string::npos);
}

TEST_CASE("bad bodies from a BMC give errors naming the resource never a crash") {
    // `part` empty: a required resource, the inventory fails. Otherwise an
    // optional one: the inventory stands with a warning about that part.
    struct Case {
        const char* what;
        std::string path;
        Reply reply;
        std::string code;
        std::string mentions;
        std::string part;
    };
    std::vector<Case> cases = {
        {"malformed JSON", "/redfish/v1/Systems", Reply{200, "{\"Members\": [", {}, ""}, "redfish.json",
         "GET /redfish/v1/Systems", ""},
        {"members of the wrong type", "/redfish/v1/Systems", json_reply({{"Members", "all of them"}}), "redfish.type",
         "/Members", ""},
        {"a member without @odata.id", "/redfish/v1/Systems", json_reply({{"Members", {{{"id", 1}}}}}),
         "redfish.missing", "/Members/0/@odata.id", ""},
        {"a version that is a number", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
         json_reply({{"Id", "BIOS"}, {"Version", 1.5}}), "", "/Version: expected a string", "firmware_inventory"},
        {"a body that is an array", "/redfish/v1/Managers/M1", json_reply(json::array({1, 2})), "",
         "GET /redfish/v1/Managers/M1", "manager"},
        {"a huge body", "/redfish/v1/Systems/S1",
         Reply{200, "{\"x\": \"" + std::string(20u << 20, 'a') + "\"}", {}, ""}, "http.too_large", "", ""},
        {"an empty 200", "/redfish/v1/Managers", Reply{200, "", {}, ""}, "", "empty body", "manager"},
    };
    for (const auto& k : cases) {
        SECTION(k.what) {
            FakeBmc bmc;
            bmc.minimal_tree();
            bmc.on("GET", k.path, k.reply);
            Client c(std::make_shared<BmcSession>(bmc, endpoint()));
            auto inv = kiln::firmware::read_inventory(c);
            if (k.part.empty()) {
                REQUIRE_FALSE(inv);
                CHECK(inv.error().code == k.code);
                CHECK(inv.error().message.find(k.mentions) != std::string::npos);
            } else {
                REQUIRE(inv);
                REQUIRE(inv->warnings.size() == 1);
                CHECK(inv->warnings[0].part == k.part);
                CHECK(inv->warnings[0].message.find(k.mentions) != std::string::npos);
                CHECK(inv->system_uri == "/redfish/v1/Systems/S1");  // the rest was read
            }
        }
    }
    SECTION("the service root missing its Systems link") {
        FakeBmc bmc;
        bmc.minimal_tree();
        bmc.on("GET", "/redfish/v1/", json_reply({{"Name", "root"}}));
        Client c(std::make_shared<BmcSession>(bmc, endpoint()));
        auto inv = kiln::firmware::read_inventory(c);
        REQUIRE_FALSE(inv);
        CHECK(inv.error().message == "GET /redfish/v1/: /Systems: missing");
    }
}

TEST_CASE("every DSP0266 TaskState is classified") {
    for (const char* s :
         {"New", "Starting", "Running", "Pending", "Stopping", "Cancelling", "Service", "Suspended", "Interrupted"})
        CHECK(task_phase(s, "OK") == TaskPhase::Running);
    CHECK(task_phase("Completed", "OK") == TaskPhase::Succeeded);
    CHECK(task_phase("Completed", "Warning") == TaskPhase::Succeeded);
    CHECK(task_phase("Completed", "") == TaskPhase::Succeeded);
    CHECK(task_phase("Completed", "Critical") == TaskPhase::Failed);
    for (const char* s : {"Exception", "Killed", "Cancelled", "Exploded"})
        CHECK(task_phase(s, "OK") == TaskPhase::Failed);
}

TEST_CASE("a task is followed through 202s a BMC restart and a re-login to its end") {
    FakeBmc bmc;
    bmc.minimal_tree();
    bmc.on("POST", "/redfish/v1/SessionService/Sessions",
           {json_reply({}, 201, {{"X-Auth-Token", "t1"}, {"Location", "/redfish/v1/SessionService/Sessions/1"}}),
            json_reply({}, 201, {{"X-Auth-Token", "t2"}, {"Location", "/redfish/v1/SessionService/Sessions/2"}})});
    bmc.on("GET", "/redfish/v1/TaskService/Tasks/7/Monitor",
           {json_reply({{"TaskState", "Running"}, {"PercentComplete", 10}}, 202, {{"Retry-After", "3"}}),
            Reply{0, "", {}, "http.connect"},  // the BMC restarts
            json_reply({}, 401),               // and forgot the session
            json_reply({{"TaskState", "Completed"}, {"TaskStatus", "OK"}, {"Messages", json::array()}})});
    Waits waits;
    Client c(std::make_shared<BmcSession>(bmc, endpoint()), waits.waiter());
    redfish::Response accepted;
    accepted.status = 202;
    accepted.method = "POST";
    accepted.uri = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate";
    accepted.headers = {{"Location", "/redfish/v1/TaskService/Tasks/7/Monitor"}};
    std::vector<std::string> states;
    TaskOptions opts;
    opts.poll_interval = milliseconds(1000);
    opts.progress = [&](const std::string& s, int) { states.push_back(s); };
    auto r = follow_task(c, accepted, opts);
    REQUIRE(r);
    CHECK(r->state == "Completed");
    CHECK(states.front() == "Running");
    CHECK(std::find(waits.seen.begin(), waits.seen.end(), milliseconds(3000)) != waits.seen.end());
    CHECK(bmc.count("POST", "/redfish/v1/SessionService/Sessions") == 2);
}

TEST_CASE("a running task is polled by its PercentComplete, not every Retry-After, and its end is still seen") {
    // A 60 s task that asks for a poll every second, on a clock the test
    // moves by each wait the poll asks for.
    FakeBmc bmc;
    bmc.minimal_tree();
    const std::string monitor = "/redfish/v1/TaskService/Tasks/9/Monitor";
    auto t = milliseconds(0);
    const auto task = milliseconds(60000);
    bmc.hook = [&](const net::HttpRequest&, const std::string& path) {
        if (path != monitor) return;
        if (t >= task) {
            bmc.on("GET", monitor, json_reply({{"TaskState", "Completed"}, {"TaskStatus", "OK"}}));
            return;
        }
        const int percent = static_cast<int>(100 * t.count() / task.count());
        bmc.on("GET", monitor,
               json_reply(
                   {{"TaskState", percent < 10 ? "New" : "Running"}, {"PercentComplete", percent < 10 ? 0 : percent}},
                   202, {{"Retry-After", "1"}}));
    };
    Waits waits;
    Client c(std::make_shared<BmcSession>(bmc, endpoint()), waits.waiter());
    TaskOptions opts;
    opts.now = [&] { return std::chrono::steady_clock::time_point(t); };
    auto poll = TaskPoll::of_uri(monitor, opts);
    std::vector<milliseconds> waited;
    while (!poll.done()) {
        t += poll.wait();
        waited.push_back(poll.wait());
        REQUIRE(poll.step(c));
        REQUIRE(poll.result().polls < 100);
    }
    INFO("polls " << poll.result().polls << ", ended seen at " << t.count() << " ms");
    CHECK(poll.result().state == "Completed");
    // Every second would have been 61 polls.
    CHECK(poll.result().polls <= 20);
    // Seen within one Retry-After of its end, and no wait shorter than it.
    CHECK(t <= task + milliseconds(1000));
    for (size_t i = 1; i < waited.size(); ++i) CHECK(waited[i] >= milliseconds(1000));
    for (auto w : waited) CHECK(w <= opts.max_poll_interval);

    // A task whose PercentComplete stops moving is still polled, at most
    // max_poll_interval apart.
    t = milliseconds(0);
    bmc.hook = [&](const net::HttpRequest&, const std::string& path) {
        if (path != monitor) return;
        const int percent = t < milliseconds(20000) ? static_cast<int>(t.count() / 400) : 50;
        bmc.on("GET", monitor,
               json_reply({{"TaskState", "Running"}, {"PercentComplete", std::max(1, percent)}}, 202,
                          {{"Retry-After", "1"}}));
    };
    auto stuck = TaskPoll::of_uri(monitor, opts);
    int polls = 0;
    while (t < milliseconds(600000)) {
        t += stuck.wait();
        CHECK(stuck.wait() <= opts.max_poll_interval);
        REQUIRE(stuck.step(c));
        ++polls;
    }
    CHECK(polls >= 600 / 30);
}

TEST_CASE("a task Completed with Critical status or ending in Exception is a failure with its messages") {
    FakeBmc bmc;
    bmc.minimal_tree();
    Client c(std::make_shared<BmcSession>(bmc, endpoint()), [](milliseconds) { return true; });
    bmc.on("GET", "/t/1",
           json_reply({{"TaskState", "Completed"},
                       {"TaskStatus", "Critical"},
                       {"Messages", {{{"MessageId", "IDRAC.2.8.SYS999"}, {"Message", "Job stuck"}}}}}));
    auto r = follow_task_uri(c, "/t/1");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "redfish.task_failed");
    CHECK(r.error().message.find("Critical") != std::string::npos);
    CHECK(r.error().message.find("IDRAC.2.8.SYS999") != std::string::npos);

    bmc.on("GET", "/t/2", json_reply({{"TaskState", "Exception"}, {"TaskStatus", "Critical"}}));
    auto e = follow_task_uri(c, "/t/2");
    REQUIRE_FALSE(e);
    CHECK(e.error().message.find("Exception") != std::string::npos);

    // A task that never ends hits its timeout (transient: the engine may retry).
    bmc.on("GET", "/t/3", json_reply({{"TaskState", "Running"}}));
    TaskOptions quick;
    quick.timeout = milliseconds(0);
    auto t = follow_task_uri(c, "/t/3", quick);
    REQUIRE_FALSE(t);
    CHECK(t.error().code == "redfish.task_timeout");
    CHECK(t.error().transient);
}

TEST_CASE("vendors are told apart by the service root and the manager") {
    CHECK(detect_vendor(json{{"Vendor", "Dell"}}, json()).name == "dell");
    CHECK(detect_vendor(json{{"Oem", {{"Hpe", json::object()}}}}, json()).name == "hpe");
    CHECK(detect_vendor(json::object(), json{{"Model", "XCC"}}).name == "lenovo");
    CHECK(detect_vendor(json{{"Vendor", "OpenBMC"}}, json()).multipart_only);
    CHECK(detect_vendor(json{{"Oem", {{"Supermicro", json::object()}}}}, json()).name == "supermicro");
    CHECK(detect_vendor(json{{"Vendor", "Contoso"}}, json()).name == "generic");
}

TEST_CASE("BIOS intents map to the vendor's attribute names and the registry's values") {
    json hpe_attrs = {{"Sriov", "Enabled"}, {"ProcAmdIoVt", "Disabled"}};
    auto r =
        map_bios_intents(profile_for(Vendor::Hpe), {{"sriov", false}, {"iommu", true}, {"acs", false}}, hpe_attrs, {});
    REQUIRE(r);
    CHECK(r->attributes == json{{"Sriov", "Disabled"}, {"ProcAmdIoVt", "Enabled"}});
    REQUIRE(r->not_applicable.size() == 1);  // HPE has no ACS attribute here
    CHECK(r->not_applicable[0].rfind("acs:", 0) == 0);

    // Lenovo spells the value "Enable"; the registry wins over the table.
    json lenovo = {{"Processors_IOMMU", "Disable"}};
    auto l = map_bios_intents(profile_for(Vendor::Lenovo), {{"iommu", true}}, lenovo,
                              {{"Processors_IOMMU", {"Enabled", "Disabled"}}});
    REQUIRE(l);
    CHECK(l->attributes["Processors_IOMMU"] == "Enabled");

    // Boolean attributes get booleans.
    auto b = map_bios_intents(profile_for(Vendor::Generic), {{"sriov", true}}, json{{"SRIOV", false}}, {});
    REQUIRE(b);
    CHECK(b->attributes["SRIOV"] == true);

    // A required intent with no attribute on this BMC is an error naming it.
    auto missing = map_bios_intents(profile_for(Vendor::Dell), {{"sriov", true}}, json{{"Other", 1}}, {});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == "firmware.bios_intent");
    CHECK(missing.error().message.find("SriovGlobalEnable") != std::string::npos);
}
