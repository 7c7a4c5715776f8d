// In-process tests of one emulated BMC: requests built by hand, answers
// read directly, no sockets.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "firmware/bmc/bmc_state.h"
#include "firmware/bmc/computer_system_reset.h"
#include "tests/bmc/bmc_test_util.h"

using namespace kiln::bmc;
using kiln::bmc::test::body_of;
using kiln::bmc::test::request;
using nlohmann::json;

namespace {

const char* kDmtf = "dmtf-public-rackmount1";
const char* kHpe = "hpe-dl325";
const std::string kDmtfSystem = "/redfish/v1/Systems/437XR1138R2";

BmcConfig config_for(const std::string& state_file = "") {
    BmcConfig c;
    c.user = "admin";
    c.password = test::kPassword;
    c.state_file = state_file;
    return c;
}

std::unique_ptr<BmcState> open_bmc(const std::string& mockup, BmcConfig config = config_for()) {
    auto state = BmcState::open(test::mockup(mockup), std::move(config));
    if (!state) FAIL(state.error().str());
    return std::move(*state);
}

HeaderMap basic() {
    return {{"Authorization", test::basic_auth("admin", test::kPassword)}};
}

BmcResponse authed(BmcState& bmc, const std::string& method, const std::string& path, const std::string& body = "",
                   HeaderMap headers = {}) {
    headers["Authorization"] = test::basic_auth("admin", test::kPassword);
    return bmc.handle(request(method, path, body, headers));
}

std::string error_id(const BmcResponse& r) {
    return body_of(r)["error"]["@Message.ExtendedInfo"][0]["MessageId"];
}

}  // namespace

TEST_CASE("bmc state serves the service root without credentials and refuses the rest with 401") {
    auto bmc = open_bmc(kDmtf);
    auto root = bmc->handle(request("GET", "/redfish/v1/"));
    CHECK(root.status == 200);
    CHECK(body_of(root)["Id"] == "RootService");
    CHECK_FALSE(root.header("ETag").empty());
    auto versions = bmc->handle(request("GET", "/redfish"));
    CHECK(versions.status == 200);
    CHECK(body_of(versions)["v1"] == "/redfish/v1/");

    auto systems = bmc->handle(request("GET", "/redfish/v1/Systems"));
    CHECK(systems.status == 401);
    auto err = body_of(systems)["error"];
    CHECK(err["code"] == "Base.1.8.NoValidSession");
    CHECK_FALSE(err["message"].get<std::string>().empty());
    CHECK(err["@Message.ExtendedInfo"].size() == 1);
    CHECK(bmc->handle(request("PATCH", kDmtfSystem, R"({"AssetTag": "x"})")).status == 401);
    CHECK(
        bmc->handle(request("POST", kDmtfSystem + "/Actions/ComputerSystem.Reset", R"({"ResetType": "On"})")).status ==
        401);
}

TEST_CASE("bmc state basic auth takes the right password only") {
    auto bmc = open_bmc(kDmtf);
    CHECK(bmc->handle(request("GET", "/redfish/v1/Systems", "", basic())).status == 200);
    HeaderMap wrong{{"Authorization", test::basic_auth("admin", "guess")}};
    auto refused = bmc->handle(request("GET", "/redfish/v1/Systems", "", wrong));
    CHECK(refused.status == 401);
    CHECK(refused.header("WWW-Authenticate").find("Basic") == 0);
    HeaderMap junk{{"Authorization", "Basic !!!!"}};
    CHECK(bmc->handle(request("GET", "/redfish/v1/Systems", "", junk)).status == 401);
}

TEST_CASE("bmc state sessions: login gives a token and a Location and logout ends it") {
    auto bmc = open_bmc(kDmtf);
    // The mockup's captured session is not ours: the collection starts empty.
    auto empty = authed(*bmc, "GET", "/redfish/v1/SessionService/Sessions");
    CHECK(body_of(empty)["Members@odata.count"] == 0);
    CHECK(authed(*bmc, "GET", "/redfish/v1/SessionService/Sessions/1234567890ABCDEF").status == 404);

    auto bad = bmc->handle(
        request("POST", "/redfish/v1/SessionService/Sessions", R"({"UserName": "admin", "Password": "nope"})"));
    CHECK(bad.status == 401);
    auto missing = bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions", R"({"UserName": "admin"})"));
    CHECK(missing.status == 400);
    CHECK(error_id(missing) == "Base.1.8.PropertyMissing");

    json creds = {{"UserName", "admin"}, {"Password", test::kPassword}};
    auto login = bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions", creds.dump()));
    REQUIRE(login.status == 201);
    const std::string token = login.header("X-Auth-Token");
    const std::string location = login.header("Location");
    CHECK(token.size() == 32);
    CHECK(location.rfind("/redfish/v1/SessionService/Sessions/", 0) == 0);
    CHECK(body_of(login)["UserName"] == "admin");

    HeaderMap with_token{{"X-Auth-Token", token}};
    CHECK(bmc->handle(request("GET", kDmtfSystem, "", with_token)).status == 200);
    auto listed = bmc->handle(request("GET", "/redfish/v1/SessionService/Sessions", "", with_token));
    CHECK(body_of(listed)["Members"][0]["@odata.id"] == location);
    CHECK(bmc->handle(request("GET", location, "", with_token)).status == 200);

    CHECK(bmc->handle(request("DELETE", location, "", with_token)).status == 204);
    auto after = bmc->handle(request("GET", kDmtfSystem, "", with_token));
    CHECK(after.status == 401);
    CHECK(error_id(after) == "Base.1.8.NoValidSession");
    CHECK(bmc->session_count() == 0);
}

TEST_CASE("bmc state session limit answers 503 RAC0218 until one logs out") {
    BmcConfig c = config_for();
    c.session_limit = 2;
    auto bmc = open_bmc(kHpe, c);
    json creds = {{"UserName", "admin"}, {"Password", test::kPassword}};
    auto first = bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions/", creds.dump()));
    auto second = bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions/", creds.dump()));
    REQUIRE(first.status == 201);
    REQUIRE(second.status == 201);
    auto third = bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions/", creds.dump()));
    CHECK(third.status == 503);
    CHECK(error_id(third) == "IDRAC.2.8.RAC0218");
    CHECK(bmc->session_count() == 2);

    HeaderMap t{{"X-Auth-Token", first.header("X-Auth-Token")}};
    CHECK(bmc->handle(request("DELETE", first.header("Location"), "", t)).status == 204);
    CHECK(bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions/", creds.dump())).status == 201);
}

TEST_CASE("bmc state drops idle sessions after SessionService.SessionTimeout") {
    auto now = std::chrono::steady_clock::time_point{};
    BmcConfig c = config_for();
    c.clock = [&now] { return now; };
    auto bmc = open_bmc(kDmtf, c);  // the DMTF tree says 30 s
    json creds = {{"UserName", "admin"}, {"Password", test::kPassword}};
    auto login = bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions", creds.dump()));
    HeaderMap t{{"X-Auth-Token", login.header("X-Auth-Token")}};
    now += std::chrono::seconds(20);
    CHECK(bmc->handle(request("GET", kDmtfSystem, "", t)).status == 200);  // use keeps it alive
    now += std::chrono::seconds(20);
    CHECK(bmc->handle(request("GET", kDmtfSystem, "", t)).status == 200);
    now += std::chrono::seconds(31);
    CHECK(bmc->handle(request("GET", kDmtfSystem, "", t)).status == 401);
    CHECK(bmc->session_count() == 0);
}

TEST_CASE("bmc state PATCH with a stale If-Match gets 412 and changes nothing") {
    auto bmc = open_bmc(kDmtf);
    const std::string etag = bmc->etag(kDmtfSystem);
    REQUIRE(etag.size() == 18);
    auto ok = authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "rack-7"})", {{"If-Match", etag}});
    REQUIRE(ok.status == 200);
    const std::string new_etag = ok.header("ETag");
    CHECK(new_etag != etag);
    CHECK(new_etag == bmc->etag(kDmtfSystem));

    auto stale = authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "rack-8"})", {{"If-Match", etag}});
    CHECK(stale.status == 412);
    CHECK(error_id(stale) == "Base.1.8.PreconditionFailed");
    CHECK((*bmc->resource(kDmtfSystem))["AssetTag"] == "rack-7");
    CHECK(bmc->etag(kDmtfSystem) == new_etag);

    CHECK(authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "rack-9"})", {{"If-Match", "*"}}).status == 200);
    CHECK(authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "rack-9"})", {{"If-Match", "W/" + bmc->etag(kDmtfSystem)}})
              .status == 200);
}

TEST_CASE("bmc state PATCH merges objects member by member") {
    auto bmc = open_bmc(kDmtf);
    auto r = authed(*bmc, "PATCH", kDmtfSystem,
                    R"({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous"}})");
    REQUIRE(r.status == 200);
    auto boot = body_of(r)["Boot"];
    CHECK(boot["BootSourceOverrideTarget"] == "Cd");
    CHECK(boot["BootSourceOverrideEnabled"] == "Continuous");
    CHECK(boot["BootSourceOverrideMode"] == "UEFI");  // untouched members stay
    CHECK(boot["BootSourceOverrideTarget@Redfish.AllowableValues"].size() == 10);
    CHECK((*bmc->resource(kDmtfSystem))["Boot"]["UefiTargetBootSourceOverride"] == "/0x31/0x33/0x01/0x01");
}

TEST_CASE("bmc state PATCH refuses what a real BMC refuses") {
    auto bmc = open_bmc(kDmtf);
    const std::string before = bmc->etag(kDmtfSystem);
    auto not_in_list = authed(*bmc, "PATCH", kDmtfSystem, R"({"Boot": {"BootSourceOverrideTarget": "Floppy"}})");
    CHECK(not_in_list.status == 400);
    CHECK(error_id(not_in_list) == "Base.1.8.PropertyValueNotInList");
    CHECK(error_id(authed(*bmc, "PATCH", kDmtfSystem, R"({"Colour": "red"})")) == "Base.1.8.PropertyUnknown");
    CHECK(error_id(authed(*bmc, "PATCH", kDmtfSystem, R"({"@odata.id": "/x"})")) == "Base.1.8.PropertyNotWritable");
    CHECK(error_id(authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": 7})")) == "Base.1.8.PropertyValueTypeError");
    CHECK(error_id(authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": )")) == "Base.1.8.MalformedJSON");
    CHECK(error_id(authed(*bmc, "PATCH", kDmtfSystem, "[1, 2]")) == "Base.1.8.MalformedJSON");
    // A number that overflows is the client's malformed JSON (400), not an
    // internal error of the emulator (500).
    auto overflow = authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": 1e400})");
    CHECK(overflow.status == 400);
    CHECK(error_id(overflow) == "Base.1.8.MalformedJSON");
    CHECK(authed(*bmc, "PATCH", "/redfish/v1/Systems", R"({"Name": "x"})").status == 405);
    CHECK(authed(*bmc, "PATCH", "/redfish/v1/NoSuchThing", R"({"Name": "x"})").status == 404);
    CHECK(bmc->etag(kDmtfSystem) == before);
}

TEST_CASE("reset types map to power states and POST") {
    CHECK(plan_reset("On", "ForceOff")->power_state == "Off");
    CHECK_FALSE(plan_reset("On", "ForceOff")->boots);
    CHECK(plan_reset("Off", "On")->boots);
    CHECK_FALSE(plan_reset("On", "On")->boots);
    CHECK(plan_reset("On", "ForceRestart")->boots);
    CHECK(plan_reset("On", "GracefulShutdown")->power_state == "Off");
    CHECK(plan_reset("On", "PushPowerButton")->power_state == "Off");
    CHECK(plan_reset("Off", "PushPowerButton")->power_state == "On");
    CHECK(plan_reset("On", "Nmi")->power_state == "On");
    CHECK_FALSE(plan_reset("On", "Explode").ok());
}

TEST_CASE("bmc state Reset changes PowerState and honours the allowable ResetType values") {
    auto bmc = open_bmc(kHpe);
    const std::string system = "/redfish/v1/Systems/1";
    const std::string target = system + "/Actions/ComputerSystem.Reset";
    CHECK(authed(*bmc, "POST", target, R"({"ResetType": "ForceOff"})").status == 204);
    CHECK((*bmc->resource(system))["PowerState"] == "Off");
    CHECK(authed(*bmc, "POST", target, R"({"ResetType": "On"})").status == 204);
    CHECK((*bmc->resource(system))["PowerState"] == "On");
    // HPE's list lacks ForceOn; the DMTF one has it.
    auto refused = authed(*bmc, "POST", target, R"({"ResetType": "ForceOn"})");
    CHECK(refused.status == 400);
    CHECK(error_id(refused) == "Base.1.8.ActionParameterValueNotInList");
    CHECK(error_id(authed(*bmc, "POST", target, "{}")) == "Base.1.8.ActionParameterMissing");

    auto dmtf = open_bmc(kDmtf);
    CHECK(authed(*dmtf, "POST", kDmtfSystem + "/Actions/ComputerSystem.Reset", R"({"ResetType": "ForceOn"})").status ==
          204);
    // Actions kiln-bmc does not perform yet say so.
    CHECK(authed(*dmtf, "POST", kDmtfSystem + "/Bios/Actions/Bios.ResetBios", "{}").status == 501);
}

TEST_CASE("bmc state one-time boot override is used up by the next boot") {
    auto bmc = open_bmc(kDmtf);
    REQUIRE((*bmc->resource(kDmtfSystem))["Boot"]["BootSourceOverrideEnabled"] == "Once");
    CHECK(authed(*bmc, "POST", kDmtfSystem + "/Actions/ComputerSystem.Reset", R"({"ResetType": "ForceOff"})").status ==
          204);
    CHECK((*bmc->resource(kDmtfSystem))["Boot"]["BootSourceOverrideEnabled"] == "Once");
    CHECK(authed(*bmc, "POST", kDmtfSystem + "/Actions/ComputerSystem.Reset", R"({"ResetType": "On"})").status == 204);
    CHECK((*bmc->resource(kDmtfSystem))["Boot"]["BootSourceOverrideEnabled"] == "Disabled");
}

TEST_CASE("bmc state BIOS settings stay pending until a reset applies them") {
    struct Case {
        std::string mockup, system, bios, settings;
    };
    for (const Case& c :
         {Case{kDmtf, kDmtfSystem, kDmtfSystem + "/Bios", kDmtfSystem + "/Bios/Settings"},
          Case{kHpe, "/redfish/v1/Systems/1", "/redfish/v1/systems/1/bios/", "/redfish/v1/systems/1/bios/settings/"}}) {
        INFO(c.mockup);
        auto bmc = open_bmc(c.mockup);
        // The Bios resource itself is read-only.
        CHECK(authed(*bmc, "PATCH", c.bios, R"({"Attributes": {"AdminPhone": "1"}})").status == 405);

        json change = {{"Attributes", {{"AdminPhone", "555-0100"}}},
                       {"@Redfish.SettingsApplyTime", {{"ApplyTime", "OnReset"}}}};
        auto patched = authed(*bmc, "PATCH", c.settings, change.dump(), {{"If-Match", bmc->etag(c.settings)}});
        REQUIRE(patched.status == 200);
        CHECK(body_of(patched)["Attributes"]["AdminPhone"] == "555-0100");
        CHECK((*bmc->resource(c.bios))["Attributes"]["AdminPhone"] == "");

        auto unknown = authed(*bmc, "PATCH", c.settings, R"({"Attributes": {"NoSuchKnob": "On"}})");
        CHECK(error_id(unknown) == "Base.1.8.PropertyUnknown");
        auto wrong_type = authed(*bmc, "PATCH", c.settings, R"({"Attributes": {"AdminPhone": 5}})");
        CHECK(error_id(wrong_type) == "Base.1.8.PropertyValueTypeError");

        const std::string bios_etag = bmc->etag(c.bios);
        CHECK(authed(*bmc, "POST", c.system + "/Actions/ComputerSystem.Reset", R"({"ResetType": "ForceRestart"})")
                  .status == 204);
        auto bios = *bmc->resource(c.bios);
        CHECK(bios["Attributes"]["AdminPhone"] == "555-0100");
        CHECK(bios["@Redfish.Settings"]["Messages"][0]["MessageId"] == "Base.1.8.Success");
        CHECK((*bmc->resource(c.settings))["Attributes"].empty());
        CHECK(bmc->etag(c.bios) != bios_etag);
    }
}

TEST_CASE("bmc state HPE lower-case links resolve to the tree") {
    auto bmc = open_bmc(kHpe);
    auto r = authed(*bmc, "GET", "/redfish/v1/systems/1/bios/");
    CHECK(r.status == 200);
    CHECK(body_of(r)["Id"] == "bios");
    // @odata.etag follows the ETag header where the vendor carried one.
    CHECK(body_of(r)["@odata.etag"] == r.header("ETag"));
    CHECK(authed(*bmc, "GET", "/redfish/v1/$metadata").content_type == "application/xml");
}

TEST_CASE("bmc state survives a reload from its state file") {
    test::ScratchDir dir;
    const std::string file = dir.file("bmc-0.json");
    std::string token;
    {
        auto bmc = open_bmc(kDmtf, config_for(file));
        REQUIRE(authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "kept"})").status == 200);
        REQUIRE(
            authed(*bmc, "PATCH", kDmtfSystem + "/Bios/Settings", R"({"Attributes": {"AdminPhone": "42"}})").status ==
            200);
        REQUIRE(authed(*bmc, "POST", kDmtfSystem + "/Actions/ComputerSystem.Reset", R"({"ResetType": "ForceOff"})")
                    .status == 204);
        json creds = {{"UserName", "admin"}, {"Password", test::kPassword}};
        token =
            bmc->handle(request("POST", "/redfish/v1/SessionService/Sessions", creds.dump())).header("X-Auth-Token");
    }
    CHECK(std::filesystem::exists(file));
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        CHECK(entry.path().filename() == "bmc-0.json");  // no temp file left behind
    }
    auto again = open_bmc(kDmtf, config_for(file));
    auto system = *again->resource(kDmtfSystem);
    CHECK(system["AssetTag"] == "kept");
    CHECK(system["PowerState"] == "Off");
    CHECK((*again->resource(kDmtfSystem + "/Bios/Settings"))["Attributes"]["AdminPhone"] == "42");
    // Sessions do not survive: clients must log in again after a BMC restart.
    CHECK(again->handle(request("GET", kDmtfSystem, "", {{"X-Auth-Token", token}})).status == 401);
    // The pending BIOS change is still applied by the next boot.
    CHECK(authed(*again, "POST", kDmtfSystem + "/Actions/ComputerSystem.Reset", R"({"ResetType": "On"})").status ==
          204);
    CHECK((*again->resource(kDmtfSystem + "/Bios"))["Attributes"]["AdminPhone"] == "42");
}

TEST_CASE("bmc state refuses a broken state file or one from another mockup") {
    test::ScratchDir dir;
    const std::string file = dir.file("bmc-0.json");
    {
        auto bmc = open_bmc(kDmtf, config_for(file));
        REQUIRE(authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "kept"})").status == 200);
    }
    auto other = BmcState::open(test::mockup(kHpe), config_for(file));
    REQUIRE_FALSE(other.ok());
    CHECK(other.error().code == "bmc.state_mockup_mismatch");

    std::ofstream(file) << "{\"format\": \"kiln-bmc-state/1\", \"resources\": ";
    auto broken = BmcState::open(test::mockup(kDmtf), config_for(file));
    REQUIRE_FALSE(broken.ok());
    CHECK(broken.error().code == "bmc.state_malformed");
}

TEST_CASE("bmc state answers 500 and keeps the old state when the state file cannot be written") {
    test::ScratchDir dir;
    auto bmc = open_bmc(kDmtf, config_for(dir.file("gone/bmc-0.json")));  // its folder does not exist
    const std::string before = bmc->etag(kDmtfSystem);
    auto r = authed(*bmc, "PATCH", kDmtfSystem, R"({"AssetTag": "lost"})");
    CHECK(r.status == 500);
    CHECK(error_id(r) == "Base.1.8.InternalError");
    CHECK(bmc->etag(kDmtfSystem) == before);
    CHECK((*bmc->resource(kDmtfSystem))["AssetTag"] == "Chicago-45Z-2381");
}
