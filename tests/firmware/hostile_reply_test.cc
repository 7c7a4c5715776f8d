// Issue 14 item 6: a reply kiln cannot read fails that node's action with a
// named error, never the process. Hostile shapes (numbers that overflow,
// wrong types, huge integers, deep nesting, bytes that are not UTF-8) put in
// every resource of a small tree, through the parser, the inventory walk,
// the stage and a real `kiln apply --stage firmware` child process.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "firmware/redfish/redfish_json.h"
#include "firmware/redfish/task_monitor.h"
#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/command.h"
#include "tests/bmc/bmc_test_util.h"
#include "tests/firmware/fake_bmc.h"
#include "tests/firmware/firmware_fixture.h"

using namespace kiln;
using namespace kiln::redfish;
using namespace kiln::firmware::test;
using nlohmann::json;

namespace {

Endpoint endpoint() {
    return Endpoint{"http://bmc.test:8000", "admin", "s3cret-pw", {}};
}

std::string nested(int levels) {
    return std::string(static_cast<size_t>(levels), '[') + std::string(static_cast<size_t>(levels), ']');
}

// Bodies a broken or hostile BMC may send, each as raw bytes.
struct Shape {
    const char* what;
    std::string body;
};

std::vector<Shape> hostile_shapes() {
    return {
        {"a number that overflows a double", R"({"Bogus": 1e400})"},
        {"a negative overflow in a link", R"({"Members": [{"@odata.id": -1e400}]})"},
        {"an integer past 64 bits", R"({"Version": 123456789012345678901234567890, "Members": 18446744073709551616})"},
        {"an integer just past uint64", R"({"PercentComplete": 18446744073709551616})"},
        {"an unsigned past long long", R"({"Members": [], "Count": 18446744073709551615})"},
        {"every field of another type", R"({"Id": {"x": 1}, "Name": [1], "Version": true, "Members": {"a": 1},
            "Systems": "s", "Managers": 1, "UpdateService": [], "BiosVersion": 1.5, "FirmwareVersion": null,
            "Actions": 3, "Boot": "b", "FirmwareInventory": {"@odata.id": 7}})"},
        {"nesting just under the limit", "{\"Members\": " + nested(62) + "}"},
        {"nesting over the limit", "{\"Members\": " + nested(200) + "}"},
        {"bytes that are not UTF-8", "{\"Name\": \"\xff\xfe\xc0\x80\"}"},
        {"a NUL inside a link", R"({"Members": [{"@odata.id": "/redfish/v1/Systems/S1\u0000/x"}]})"},
        {"a lone surrogate escape", R"({"Version": "\ud800"})"},
        {"a bare scalar", "12"},
        {"a bare string", "\"ok\""},
        {"an array of nulls", "[null, null]"},
        {"a truncated body", R"({"Members": [{"@odata.id": "/redfish)"},
    };
}

const char* kTreeRoutes[] = {
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

TEST_CASE("a number that overflows is a named JSON error, not an exception") {
    Result<json> r = make_error("", "", "");
    REQUIRE_NOTHROW(r = parse_json(R"({"Bogus": 1e400})", "GET /redfish/v1/Systems"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "redfish.json");
    CHECK(r.error().message == "GET /redfish/v1/Systems: JSON holds a number out of range (over about 1.8e308)");
    // Syntax errors still say where.
    auto bad = parse_json("{\"a\": }", "GET /x");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("at byte") != std::string::npos);
}

TEST_CASE("an unsigned integer past long long is refused by the typed read") {
    json doc = json::parse(R"({"n": 18446744073709551615, "m": 5})");
    JsonView v(doc, "GET /r");
    auto n = v.at("n")->integer();
    REQUIRE_FALSE(n);
    CHECK(n.error().message == "GET /r: /n: integer out of range");
    CHECK(*v.at("m")->integer() == 5);
}

TEST_CASE("BMC text is made valid one-line UTF-8 and clipped between characters") {
    CHECK(valid_utf8("caf\xc3\xa9") == "caf\xc3\xa9");
    CHECK(valid_utf8("a\xff"
                     "b") == "a?b");
    CHECK(valid_utf8("\xc0\x80") == "??");       // overlong NUL
    CHECK(valid_utf8("\xed\xa0\x80") == "???");  // a surrogate
    CHECK(valid_utf8("line\nbreak\x1b[0m") == "line?break?[0m");
    CHECK(valid_utf8("\xf4\x90\x80\x80") == "????");  // past U+10FFFF
    std::string e(300, 'x');
    for (size_t i = 0; i < 100; ++i) e.replace(i * 3, 2, "\xc3\xa9");  // 'é' then 'x', repeated
    std::string clipped = clip_utf8(e, 200);
    CHECK(clipped.size() <= 203);
    CHECK(valid_utf8(clipped) == clipped);
    CHECK_NOTHROW(json(clipped).dump());
}

TEST_CASE("every hostile shape in every resource of the tree gives a value or a named error") {
    for (const auto& shape : hostile_shapes()) {
        for (const char* route : kTreeRoutes) {
            INFO(shape.what << " at " << route);
            FakeBmc bmc;
            bmc.minimal_tree();
            bmc.on("GET", route, Reply{200, shape.body, {{"Content-Type", "application/json"}}, ""});
            Client c(std::make_shared<BmcSession>(bmc, endpoint()));
            Result<firmware::BmcInventory> inv = make_error("", "", "");
            REQUIRE_NOTHROW(inv = firmware::read_inventory(c));
            if (inv) continue;  // some shapes only add an unknown field
            CHECK(inv.error().domain == "redfish");
            CHECK(inv.error().code.rfind("redfish.", 0) == 0);
            CHECK(inv.error().code != "redfish.unreadable_reply");  // handled, not just caught by the guard
            CHECK(inv.error().message.find(route) != std::string::npos);
            CHECK_NOTHROW(json(inv.error().message).dump());
        }
    }
}

TEST_CASE("a task message of multibyte text past the clip length leaves valid UTF-8 in the error") {
    FakeBmc bmc;
    bmc.minimal_tree();
    std::string text;
    for (int i = 0; i < 150; ++i) text += "\xe2\x82\xac";  // 150 euro signs, 450 bytes
    bmc.on("GET", "/redfish/v1/TaskService/Tasks/9",
           json_reply({{"TaskState", "Exception"},
                       {"TaskStatus", "Critical"},
                       {"Messages", {{{"MessageId", "Update.1.0.ApplyFailed"}, {"Message", text}}}}}));
    Client c(std::make_shared<BmcSession>(bmc, endpoint()), [](std::chrono::milliseconds) { return true; });
    Response accepted;
    accepted.status = 202;
    accepted.method = "POST";
    accepted.uri = "/x";
    accepted.headers = {{"Location", "/redfish/v1/TaskService/Tasks/9"}};
    auto r = follow_task(c, accepted, TaskOptions{});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "redfish.task_failed");
    CHECK(r.error().message.find("ApplyFailed") != std::string::npos);
    CHECK(valid_utf8(r.error().message) == r.error().message);
    CHECK_NOTHROW(json(r.error().message).dump());
}

// The process as a user runs it: one BMC answers {"Bogus": 1e400} on its
// Systems collection, the other is sound. kiln ends normally (no abort),
// the bad node fails naming the resource, the good node converges.
TEST_CASE("kiln apply --stage firmware survives a BMC answering an overflowing number and finishes the other node") {
    FakeBmc good, bad;
    for (auto* b : {&good, &bad}) {
        b->minimal_tree();
        // No session service: Basic auth, which the plain file server takes.
        b->on("GET", "/redfish/v1/",
              json_reply({{"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                          {"Managers", {{"@odata.id", "/redfish/v1/Managers"}}},
                          {"UpdateService", {{"@odata.id", "/redfish/v1/UpdateService"}}}}));
    }
    bad.on("GET", "/redfish/v1/Systems", Reply{200, R"({"Bogus": 1e400})", {}, ""});
    kiln::bmc::test::ImageServer good_http(good.get_bodies()), bad_http(bad.get_bodies());

    kiln::test::TempDir dir;
    std::string fleet = write_fleet(dir, {.bmc_urls = {good_http.url(""), bad_http.url("")}});
    kiln::CommandSpec spec;
    spec.argv = {KILN_BINARY, "apply", fleet, "--stage", "firmware"};
    spec.env = {{"KILN_FW_TEST_PASSWORD", kBmcPassword}};
    spec.timeout = std::chrono::seconds(120);
    auto r = kiln::ProcessRunner().run(spec);
    REQUIRE(r);
    INFO(r->out << r->err);
    CHECK(r->signal == 0);     // before the fix: SIGABRT from an uncaught std::out_of_range
    CHECK(r->exit_code == 1);  // a node failed, and kiln said so
    const std::string all = r->out + r->err;
    CHECK(all.find("node-1") != std::string::npos);
    CHECK(all.find("GET /redfish/v1/Systems: JSON holds a number out of range") != std::string::npos);
    CHECK(bad_http.requests() > 0);
    CHECK(good_http.requests() > 0);

    auto status =
        kiln::ProcessRunner().run(kiln::CommandSpec{.argv = {KILN_BINARY, "status", fleet, "--json"}, .env = spec.env});
    REQUIRE(status);
    INFO(status->out);
    auto st = json::parse(status->out, nullptr, false);
    REQUIRE(st.is_object());
    std::map<std::string, std::string> states;
    for (const auto& n : st["nodes"]) states[n["name"].get<std::string>()] = n["state"].get<std::string>();
    CHECK(states["node-1"] == "failed");
    CHECK(states["node-0"] != "failed");
}
