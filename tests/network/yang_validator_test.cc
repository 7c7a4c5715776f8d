#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "network/sonic/render.h"
#include "network/sonic/yang_validator.h"
#include "tests/network/network_test_util.h"

using kiln::network::sonic::ConfigDb;
using kiln::network::sonic::render_roce;
using kiln::network::sonic::YangIssue;
using kiln::network::sonic::YangValidator;
using nlohmann::json;
using namespace kiln::test::network;

namespace {

const std::string kYangDir = KILN_SONIC_YANG_TEST_DIR;

// Loading the models takes a while; every test shares one validator.
const YangValidator& validator() {
    static auto v = YangValidator::load(kYangDir);
    if (!v.ok()) FAIL("cannot load SONiC YANG models: " << v.error().str());
    return *v;
}

json rendered(const kiln::network::RoceProfile& p = roce_profile(), int ports = 4) {
    auto db = render_roce(p, cabled_ports(ports, "r1", 2));
    REQUIRE(db.ok());
    return db->json();
}

json example(const std::string& name) {
    // SONiC's own examples stay beside the models in shared/.
    return json::parse(read_file(std::string(KILN_SONIC_YANG_EXAMPLES_DIR) + "/" + name));
}

// Lists sorted so that list order does not matter in comparisons.
json normalized(json j) {
    if (j.is_object())
        for (auto& [_, v] : j.items()) v = normalized(v);
    if (j.is_array()) {
        for (auto& v : j) v = normalized(v);
        std::sort(j.begin(), j.end(), [](const json& a, const json& b) { return a.dump() < b.dump(); });
    }
    return j;
}

std::string issues_text(const std::vector<YangIssue>& issues) {
    std::string out;
    for (const auto& i : issues) out += i.str() + "\n";
    return out;
}

// The single issue of `config`, which must be rejected.
YangIssue sole_issue(const json& config) {
    auto issues = validator().check(config);
    INFO(issues_text(issues));
    REQUIRE(issues.size() == 1);
    return issues.front();
}

}  // namespace

TEST_CASE("yang validator loads the SONiC models") {
    const auto tables = validator().tables();
    for (const char* t : {"PORT", "PORT_QOS_MAP", "DSCP_TO_TC_MAP", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP",
                          "MAP_PFC_PRIORITY_TO_QUEUE", "WRED_PROFILE", "QUEUE", "SCHEDULER", "BUFFER_POOL",
                          "BUFFER_PROFILE", "BUFFER_PG", "PFC_WD", "DEVICE_METADATA"})
        CHECK(std::find(tables.begin(), tables.end(), t) != tables.end());
}

TEST_CASE("yang validator reports a missing model directory") {
    auto v = YangValidator::load("/nonexistent/sonic-yang");
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().code == "network.yang_models");
    CHECK_THAT(v.error().message, Catch::Contains("/nonexistent/sonic-yang"));
    auto empty = YangValidator::load("");
    REQUIRE_FALSE(empty.ok());
}

TEST_CASE("yang validator converts config_db.json the way SONiC does") {
    // The two example files are the same config in its two shapes.
    auto yang = validator().to_yang(example("config_db-roce-fragment.json"));
    REQUIRE(yang.ok());
    CHECK(normalized(*yang).dump(2) == normalized(example("roce-valid.json")).dump(2));
}

TEST_CASE("yang validator accepts SONiC's own valid example") {
    auto s = validator().validate(example("config_db-roce-fragment.json"));
    INFO((s.ok() ? "" : s.error().str()));
    CHECK(s.ok());
}

TEST_CASE("yang validator rejects SONiC's invalid examples naming the row") {
    auto pfc = sole_issue(example("config_db-invalid-pfc_enable.json"));
    CHECK(pfc.table == "PORT_QOS_MAP");
    CHECK(pfc.key == "Ethernet0");
    CHECK(pfc.field == "pfc_enable");

    auto portref = sole_issue(example("config_db-invalid-portref.json"));
    CHECK(portref.table == "BUFFER_PG");
    CHECK(portref.key == "Ethernet99|3");
    CHECK(portref.field == "port");
    CHECK_THAT(portref.message, Catch::Contains("Ethernet99"));
}

TEST_CASE("yang validator accepts the rendered RoCE config") {
    for (int ports : {1, 4, 64}) {
        auto s = validator().validate(rendered(roce_profile(), ports));
        INFO(ports << " ports: " << (s.ok() ? "" : s.error().str()));
        CHECK(s.ok());
    }
    auto p = roce_profile();
    p.buffer_policy = "default";
    p.lossless_priority = 4;
    p.pfc_watchdog_action = "alert";
    auto s = validator().validate(rendered(p));
    INFO((s.ok() ? "" : s.error().str()));
    CHECK(s.ok());

    auto db = render_roce(roce_profile(), cabled_ports(2, "r1", 1));
    REQUIRE(db.ok());
    CHECK(validator().validate(*db).ok());
}

TEST_CASE("yang validator rejects a bad field value naming table key and field") {
    json config = rendered();
    config["PORT_QOS_MAP"]["Ethernet4"]["pfc_enable"] = "3,9";
    auto issue = sole_issue(config);
    CHECK(issue.table == "PORT_QOS_MAP");
    CHECK(issue.key == "Ethernet4");
    CHECK(issue.field == "pfc_enable");
    CHECK_THAT(issue.str(), Catch::StartsWith("PORT_QOS_MAP|Ethernet4: pfc_enable: ") && Catch::Contains("3,9"));

    auto s = validator().validate(config);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().domain == "network");
    CHECK(s.error().code == "network.yang_invalid");
    CHECK_THAT(s.error().message, Catch::StartsWith("PORT_QOS_MAP|Ethernet4: pfc_enable: "));
    CHECK(s.error().message.find('\n') == std::string::npos);
}

TEST_CASE("yang validator rejects a reference to a missing map") {
    json config = rendered();
    SECTION("a port names a DSCP map that does not exist") {
        config["PORT_QOS_MAP"]["Ethernet8"]["dscp_to_tc_map"] = "NOPE";
        auto issue = sole_issue(config);
        CHECK(issue.str().rfind("PORT_QOS_MAP|Ethernet8: dscp_to_tc_map: ", 0) == 0);
        CHECK_THAT(issue.message, Catch::Contains("NOPE"));
    }
    SECTION("the WRED profile a queue names is gone") {
        config.erase("WRED_PROFILE");
        auto issue = sole_issue(config);
        CHECK(issue.table == "QUEUE");
        CHECK_THAT(issue.key, Catch::StartsWith("Ethernet") && Catch::EndsWith("|3"));
        CHECK(issue.field == "wred_profile");
    }
    SECTION("a queue on a port that does not exist") {
        config["QUEUE"]["Ethernet400|3"]["scheduler"] = "ROCE_LOSSLESS";
        auto issue = sole_issue(config);
        CHECK(issue.table == "QUEUE");
        CHECK(issue.key == "Ethernet400|3");
        CHECK(issue.field == "ifname");
    }
}

TEST_CASE("yang validator rejects values of the wrong type") {
    json config = rendered();
    std::string table, key, field;
    SECTION("MTU not a number") {
        config["PORT"]["Ethernet0"]["mtu"] = "jumbo";
        table = "PORT", key = "Ethernet0", field = "mtu";
    }
    SECTION("threshold not a number") {
        config["WRED_PROFILE"]["ROCE"]["green_min_threshold"] = "lots";
        table = "WRED_PROFILE", key = "ROCE", field = "green_min_threshold";
    }
    SECTION("boolean spelled yes") {
        config["WRED_PROFILE"]["ROCE"]["wred_green_enable"] = "yes";
        table = "WRED_PROFILE", key = "ROCE", field = "wred_green_enable";
    }
    SECTION("enumeration value unknown") {
        config["PFC_WD"]["Ethernet4"]["action"] = "explode";
        table = "PFC_WD", key = "Ethernet4", field = "action";
    }
    SECTION("a JSON number where CONFIG_DB holds strings") {
        config["PORT"]["Ethernet0"]["mtu"] = 9216;
        table = "PORT", key = "Ethernet0", field = "mtu";
    }
    auto issue = sole_issue(config);
    CHECK(issue.table == table);
    CHECK(issue.key == key);
    CHECK(issue.field == field);
}

TEST_CASE("yang validator rejects values out of range") {
    auto p = roce_profile();
    SECTION("switch MTU above SONiC's 9216") {
        p.switch_mtu = 9500;
        auto issues = validator().check(rendered(p));
        REQUIRE(issues.size() == 4);  // one per port
        CHECK(issues[0].str().rfind("PORT|Ethernet0: mtu: ", 0) == 0);
    }
    SECTION("watchdog detection faster than SONiC allows") {
        // kiln's render refuses detection below its poll interval, so both go low.
        p.pfc_watchdog_detection_ms = 50;
        p.pfc_watchdog_poll_ms = 50;
        auto issues = validator().check(rendered(p, 2));
        REQUIRE(issues.size() == 3);  // every bad value, not just the first
        std::vector<std::string> text;
        for (const auto& i : issues) text.push_back(i.str());
        std::sort(text.begin(), text.end());
        CHECK(text[0].rfind("PFC_WD|Ethernet0: detection_time: ", 0) == 0);
        CHECK(text[1].rfind("PFC_WD|Ethernet4: detection_time: ", 0) == 0);
        CHECK(text[2].rfind("PFC_WD|GLOBAL: POLL_INTERVAL: ", 0) == 0);
    }
    SECTION("drop probability above 100") {
        p.ecn_probability_pct = 150;
        auto issues = validator().check(rendered(p));
        REQUIRE(issues.size() == 3);  // green, yellow, red
        for (const auto& i : issues) CHECK(i.table == "WRED_PROFILE");
    }
}

TEST_CASE("yang validator rejects WRED thresholds out of order") {
    json config = rendered();
    config["WRED_PROFILE"]["ROCE"]["green_max_threshold"] = "1024";
    auto issue = sole_issue(config);
    CHECK(issue.table == "WRED_PROFILE");
    CHECK(issue.key == "ROCE");
    CHECK(issue.field == "green_max_threshold");
    CHECK_THAT(issue.message, Catch::Contains("min threshold"));
}

TEST_CASE("yang validator names the entry of a bad map") {
    json config = rendered();
    SECTION("TC out of range") {
        config["DSCP_TO_TC_MAP"]["ROCE"]["26"] = "99";
        auto issue = sole_issue(config);
        CHECK(issue.str().rfind("DSCP_TO_TC_MAP|ROCE: 26: ", 0) == 0);
    }
    SECTION("DSCP out of range") {
        config["DSCP_TO_TC_MAP"]["ROCE"]["64"] = "0";
        auto issue = sole_issue(config);
        CHECK(issue.str().rfind("DSCP_TO_TC_MAP|ROCE: 64: ", 0) == 0);
    }
}

TEST_CASE("yang validator names a missing mandatory field") {
    json config = rendered();
    config["PORT"]["Ethernet4"].erase("lanes");
    auto issue = sole_issue(config);
    CHECK(issue.table == "PORT");
    CHECK(issue.key == "Ethernet4");
    CHECK(issue.field == "lanes");
}

TEST_CASE("yang validator rejects unknown tables and fields and bad key shapes") {
    json config = rendered();
    SECTION("table") {
        config["NOT_A_TABLE"]["x"]["y"] = "z";
        auto issue = sole_issue(config);
        CHECK(issue.table == "NOT_A_TABLE");
        CHECK_THAT(issue.message, Catch::Contains("no YANG model"));
    }
    SECTION("field") {
        config["PORT"]["Ethernet0"]["colour"] = "blue";
        auto issue = sole_issue(config);
        CHECK(issue.str().rfind("PORT|Ethernet0: colour: ", 0) == 0);
    }
    SECTION("key with too few parts") {
        config["QUEUE"]["Ethernet0"]["scheduler"] = "ROCE_CNP";
        auto issue = sole_issue(config);
        CHECK(issue.table == "QUEUE");
        CHECK(issue.key == "Ethernet0");
        CHECK_THAT(issue.message, Catch::Contains("QUEUE_LIST"));
    }
    SECTION("not an object") {
        auto issues = validator().check(json::array());
        REQUIRE(issues.size() == 1);
        auto to = validator().to_yang(json::array());
        CHECK_FALSE(to.ok());
    }
}

TEST_CASE("yang validator accepts an empty config") {
    CHECK(validator().check(json::object()).empty());
}

TEST_CASE("yang validator handles fixed-row tables such as DEVICE_METADATA") {
    json config = rendered();
    config["DEVICE_METADATA"]["localhost"]["hostname"] = "leaf1";
    CHECK(validator().check(config).empty());
    config["DEVICE_METADATA"]["elsewhere"]["hostname"] = "leaf1";
    auto issue = sole_issue(config);
    CHECK(issue.table == "DEVICE_METADATA");
    CHECK(issue.key == "elsewhere");
}
