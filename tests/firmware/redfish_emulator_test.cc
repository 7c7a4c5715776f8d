// The Redfish client against kiln-bmc serving the shared mockups over real
// HTTP on loopback: sessions and logout, 401 re-login, 412 retry,
// navigation and inventory on both trees.
#include <catch2/catch.hpp>

#include <string>

#include "firmware/redfish/session_pool.h"
#include "firmware/stage/bmc_inventory.h"
#include "provisioner/net/bmc_request_tally.h"
#include "tests/bmc/bmc_test_util.h"

using namespace kiln;
using namespace kiln::redfish;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::kPassword;
using kiln::bmc::test::mockup_path;
using nlohmann::json;

namespace {

void start(BmcChild& bmc, const std::string& mockup) {
    REQUIRE(bmc.start({"--mockup", mockup_path(mockup), "--port", "0"}, {{"KILN_BMC_PASSWORD", kPassword}}));
}

Endpoint endpoint(const BmcChild& bmc) {
    return Endpoint{bmc.url(), "admin", kPassword, {}};
}

// The BMC's own view of its sessions, read with Basic auth.
std::vector<std::string> open_sessions(net::HttpClient& http, const BmcChild& bmc) {
    net::HttpRequest req;
    req.url = bmc.url() + "/redfish/v1/SessionService/Sessions";
    req.basic_user = "admin";
    req.basic_password = kPassword;
    auto r = http.send(req);
    REQUIRE(r);
    REQUIRE(r->status == 200);
    std::vector<std::string> out;
    json doc = json::parse(r->body);
    for (const auto& m : doc["Members"]) out.push_back(m["@odata.id"].get<std::string>());
    return out;
}

}  // namespace

TEST_CASE("the client walks the DMTF tree by its links and logs out at the end") {
    BmcChild bmc;
    start(bmc, "dmtf-public-rackmount1");
    net::CurlHttpClient http;
    {
        SessionPool pool(http);
        Client c(pool.acquire(endpoint(bmc)));
        auto inv = firmware::read_inventory(c);
        REQUIRE(inv);
        CHECK(inv->system_uri == "/redfish/v1/Systems/437XR1138R2");
        CHECK(inv->vendor == "generic");
        CHECK(inv->bios_version == "P79 v1.45 (12/06/2017)");
        auto bios = firmware::find_component(*inv, "BIOS");
        REQUIRE(bios);
        CHECK(bios->version == "P79 v1.45");
        CHECK(bios->uri == "/redfish/v1/UpdateService/FirmwareInventory/BIOS");
        CHECK(inv->simple_update_target == "/redfish/v1/UpdateService/Actions/SimpleUpdate");
        REQUIRE(inv->bios);
        CHECK(inv->bios->settings_uri == "/redfish/v1/Systems/437XR1138R2/Bios/Settings");
        CHECK(inv->bios->pending.contains("ProcTurboMode"));  // the mockup's captured pending change
        CHECK(open_sessions(http, bmc).size() == 1);
        CHECK(pool.acquire(endpoint(bmc))->stats().logins == 1);
    }
    CHECK(open_sessions(http, bmc).empty());
}

TEST_CASE("the client walks the HPE DL325 tree - lowercase links Oem vendor and finds its BIOS attributes") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");
    net::CurlHttpClient http;
    SessionPool pool(http);
    Client c(pool.acquire(endpoint(bmc)));
    auto inv = firmware::read_inventory(c);
    REQUIRE(inv);
    CHECK(inv->vendor == "hpe");
    CHECK(inv->system_uri == "/redfish/v1/Systems/1");
    CHECK(inv->components.size() >= 12);
    CHECK(firmware::find_component(*inv, "System ROM")->version == "A43 v2.52 (10/29/2021)");
    auto bios = firmware::find_component(*inv, "BIOS");
    REQUIRE(bios);
    CHECK(bios->uri == "/redfish/v1/UpdateService/FirmwareInventory/2");  // matched by version
    CHECK(firmware::version_matches(bios->version, "A43 v2.52"));
    REQUIRE(inv->bios);
    CHECK(inv->bios->attributes["Sriov"] == "Enabled");
    CHECK(inv->bios->pending.empty());  // HPE's settings object is a copy of the current values
    CHECK(inv->power_state == "On");
}

TEST_CASE("after the BMC forgets the session the next request logs in again and succeeds") {
    BmcChild bmc;
    start(bmc, "dmtf-public-rackmount1");
    net::CurlHttpClient http;
    SessionPool pool(http);
    auto session = pool.acquire(endpoint(bmc));
    Client c(session);
    REQUIRE(c.get("/redfish/v1/Systems"));
    auto sessions = open_sessions(http, bmc);
    REQUIRE(sessions.size() == 1);
    net::HttpRequest del;
    del.method = "DELETE";
    del.url = bmc.url() + sessions[0];
    del.basic_user = "admin";
    del.basic_password = kPassword;
    auto d = http.send(del);
    REQUIRE(d);
    REQUIRE(d->status / 100 == 2);
    auto again = c.get("/redfish/v1/Systems");
    REQUIRE(again);
    CHECK(session->stats().logins == 2);
    CHECK(open_sessions(http, bmc).size() == 1);
}

TEST_CASE("a PATCH with a stale ETag gets 412 re-reads and lands with the fresh one") {
    BmcChild bmc;
    start(bmc, "dmtf-public-rackmount1");
    net::CurlHttpClient http;
    SessionPool pool(http);
    Client c(pool.acquire(endpoint(bmc)));
    const std::string sys = "/redfish/v1/Systems/437XR1138R2";
    auto r = c.patch(sys, json{{"AssetTag", "kiln-412"}}, "\"stale-etag\"");
    REQUIRE(r);
    CHECK(r->ok());
    auto now = c.get(sys);
    REQUIRE(now);
    CHECK(now->body["AssetTag"] == "kiln-412");
    CHECK(pool.acquire(endpoint(bmc))->stats().requests >= 4);  // PATCH, GET, PATCH, GET (+ login)
}

TEST_CASE("a wrong password is a clear error that names the user not the password") {
    BmcChild bmc;
    start(bmc, "dmtf-public-rackmount1");
    net::CurlHttpClient http;
    SessionPool pool(http);
    Endpoint ep = endpoint(bmc);
    ep.password = "not-the-password-42";
    Client c(pool.acquire(ep));
    auto r = c.get("/redfish/v1/Systems");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == "redfish.auth");
    CHECK(r.error().message.find("'admin'") != std::string::npos);
    CHECK(r.error().message.find("not-the-password-42") == std::string::npos);
}

TEST_CASE("exchanges with a BMC count under its vendor once the inventory names it, 404s as 4xx") {
    BmcChild bmc;
    start(bmc, "hpe-dl325");
    auto& tally = net::BmcRequestTally::process();
    auto before = tally.by_vendor();
    net::CurlHttpClient http;
    SessionPool pool(http);
    Client c(pool.acquire(endpoint(bmc)));
    auto inv = firmware::read_inventory(c);
    REQUIRE(inv);
    REQUIRE(inv->vendor == "hpe");
    auto walked = tally.by_vendor();
    // The service root and the login come before the vendor is known.
    CHECK(walked["unknown"].requests > before["unknown"].requests);
    CHECK(walked["hpe"].requests > before["hpe"].requests + 5);
    CHECK(walked["hpe"].server_errors == before["hpe"].server_errors);

    // A later session to the same BMC counts under its vendor from the start.
    SessionPool other(http);
    Client again(other.acquire(endpoint(bmc)));
    auto missing = again.get("/redfish/v1/NoSuchResource");
    if (missing) CHECK(missing->status == 404);
    auto after = tally.by_vendor();
    CHECK(after["unknown"].requests == walked["unknown"].requests);
    CHECK(after["hpe"].client_errors == walked["hpe"].client_errors + 1);
    const std::string text = tally.render();
    CHECK(text.find("kiln_redfish_requests_total{vendor=\"hpe\"} " + std::to_string(after["hpe"].requests) + "\n") !=
          std::string::npos);
    CHECK(text.find("kiln_redfish_errors_total{vendor=\"hpe\",kind=\"4xx\"} " +
                    std::to_string(after["hpe"].client_errors) + "\n") != std::string::npos);
}
