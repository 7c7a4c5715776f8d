#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "network/fabric.h"
#include "network/sonic/render.h"
#include "tests/network/network_test_util.h"

using kiln::network::build_fabric;
using kiln::network::make_ports;
using kiln::network::SwitchPorts;
using kiln::network::sonic::ConfigDb;
using kiln::network::sonic::render_roce;
using kiln::network::sonic::render_switch;
using namespace kiln::test::network;

namespace {

ConfigDb render(const kiln::config::RoceProfile& profile, int ports = 4) {
    auto db = render_roce(profile, cabled_ports(ports, "r1", 2));
    REQUIRE(db.ok());
    return std::move(db).value();
}

std::string field(const ConfigDb& db, const std::string& table, const std::string& key, const std::string& f) {
    return db.get(table, key, f).value_or("<absent>");
}

}  // namespace

TEST_CASE("sonic render maps DSCP 26 to the lossless TC and queue") {
    const ConfigDb db = render(roce_profile());
    // SONiC's stock template maps 26 to TC 1: the render must say 3.
    CHECK(field(db, "DSCP_TO_TC_MAP", "ROCE", "26") == "3");
    CHECK(field(db, "TC_TO_QUEUE_MAP", "ROCE", "3") == "3");
    CHECK(field(db, "TC_TO_PRIORITY_GROUP_MAP", "ROCE", "3") == "3");
    CHECK(field(db, "DSCP_TO_TC_MAP", "ROCE", "48") == "6");
    // Every code point is written so no stock entry survives; all others to TC 0.
    REQUIRE(db.json()["DSCP_TO_TC_MAP"]["ROCE"].size() == 64);
    for (int d = 0; d < 64; ++d)
        if (d != 26 && d != 48) CHECK(field(db, "DSCP_TO_TC_MAP", "ROCE", std::to_string(d)) == "0");
    for (const auto& port : db.keys("PORT")) {
        CHECK(field(db, "PORT_QOS_MAP", port, "dscp_to_tc_map") == "ROCE");
        CHECK(field(db, "PORT_QOS_MAP", port, "tc_to_queue_map") == "ROCE");
        CHECK(field(db, "PORT_QOS_MAP", port, "tc_to_pg_map") == "ROCE");
    }
    CHECK(field(db, "PORT_QOS_MAP", "global", "dscp_to_tc_map") == "ROCE");
}

TEST_CASE("sonic render follows the profile's DSCP and priorities") {
    auto p = roce_profile();
    p.roce_dscp = 24;
    p.lossless_priority = 4;
    p.cnp_dscp = 46;
    p.cnp_priority = 5;
    const ConfigDb db = render(p);
    CHECK(field(db, "DSCP_TO_TC_MAP", "ROCE", "24") == "4");
    CHECK(field(db, "DSCP_TO_TC_MAP", "ROCE", "26") == "0");
    CHECK(field(db, "DSCP_TO_TC_MAP", "ROCE", "46") == "5");
    CHECK(field(db, "PORT_QOS_MAP", "Ethernet0", "pfc_enable") == "4");
    CHECK(field(db, "QUEUE", "Ethernet0|4", "wred_profile") == "ROCE");
    CHECK(db.has("BUFFER_PG", "Ethernet0|4"));
    CHECK_FALSE(db.has("BUFFER_PG", "Ethernet0|3"));
}

TEST_CASE("sonic render enables PFC on the lossless priority only") {
    const ConfigDb db = render(roce_profile());
    REQUIRE(db.keys("PORT").size() == 4);
    for (const auto& port : db.keys("PORT")) CHECK(field(db, "PORT_QOS_MAP", port, "pfc_enable") == "3");
    CHECK(field(db, "PORT_QOS_MAP", "global", "pfc_enable") == "<absent>");
    CHECK(field(db, "MAP_PFC_PRIORITY_TO_QUEUE", "ROCE", "3") == "3");
    // Only the lossless TC gets its own (headroom-backed) PG.
    for (int tc = 0; tc < 8; ++tc)
        CHECK(field(db, "TC_TO_PRIORITY_GROUP_MAP", "ROCE", std::to_string(tc)) == (tc == 3 ? "3" : "0"));
    for (const auto& key : db.keys("BUFFER_PG")) CHECK(key.substr(key.find('|')) == "|3");
    CHECK(db.keys("BUFFER_PG").size() == 4);
    CHECK(field(db, "BUFFER_PG", "Ethernet0|3", "profile") == "pg_lossless_400000_5m_profile");
    CHECK(field(db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "pool") == "ingress_lossless_pool");
    CHECK(db.has("BUFFER_POOL", "ingress_lossless_pool"));
}

TEST_CASE("sonic render puts ECN marking on the lossless queue") {
    const ConfigDb db = render(roce_profile());
    CHECK(field(db, "WRED_PROFILE", "ROCE", "ecn") == "ecn_all");
    CHECK(field(db, "WRED_PROFILE", "ROCE", "wred_green_enable") == "true");
    CHECK(field(db, "WRED_PROFILE", "ROCE", "green_min_threshold") == std::to_string(150 * 1024));
    CHECK(field(db, "WRED_PROFILE", "ROCE", "green_max_threshold") == std::to_string(1500 * 1024));
    CHECK(field(db, "WRED_PROFILE", "ROCE", "green_drop_probability") == "10");
    for (const auto& port : db.keys("PORT")) {
        CHECK(field(db, "QUEUE", port + "|3", "wred_profile") == "ROCE");
        CHECK(field(db, "QUEUE", port + "|3", "scheduler") == "ROCE_LOSSLESS");
    }
    // No other queue marks.
    for (const auto& key : db.keys("QUEUE"))
        if (key.substr(key.find('|')) != "|3") CHECK(field(db, "QUEUE", key, "wred_profile") == "<absent>");
    CHECK(field(db, "SCHEDULER", "ROCE_LOSSLESS", "type") == "DWRR");
}

TEST_CASE("sonic render gives CNPs a strict queue") {
    const ConfigDb db = render(roce_profile());
    CHECK(field(db, "QUEUE", "Ethernet0|6", "scheduler") == "ROCE_CNP");
    CHECK(field(db, "SCHEDULER", "ROCE_CNP", "type") == "STRICT");
    CHECK(field(db, "PORT_QOS_MAP", "Ethernet0", "pfc_enable").find('6') == std::string::npos);
}

TEST_CASE("sonic render turns the PFC watchdog on for every port") {
    auto p = roce_profile();
    p.pfc_watchdog_action = "forward";
    const ConfigDb db = render(p);
    for (const auto& port : db.keys("PORT")) {
        CHECK(field(db, "PORT_QOS_MAP", port, "pfcwd_sw_enable") == "3");
        CHECK(field(db, "PFC_WD", port, "action") == "forward");
        CHECK(field(db, "PFC_WD", port, "detection_time") == "200");
        CHECK(field(db, "PFC_WD", port, "restoration_time") == "400");
    }
}

TEST_CASE("sonic render sets the switch MTU on every port") {
    auto p = roce_profile();
    p.switch_mtu = 9100;
    const ConfigDb db = render(p, 32);
    REQUIRE(db.keys("PORT").size() == 32);
    for (const auto& port : db.keys("PORT")) {
        CHECK(field(db, "PORT", port, "mtu") == "9100");
        CHECK(field(db, "PORT", port, "admin_status") == "up");
        CHECK(field(db, "PORT", port, "speed") == "400000");
    }
    CHECK(field(db, "PORT", "Ethernet4", "lanes") == "4,5,6,7");
    CHECK(field(db, "PORT", "Ethernet0", "description") == "r1n1 mlx5_0");
    CHECK(field(db, "PORT", "Ethernet8", "description") == "<absent>");
}

TEST_CASE("sonic render with the default buffer policy leaves buffers to the switch") {
    auto p = roce_profile();
    p.buffer_policy = "default";
    const ConfigDb db = render(p);
    CHECK(db.keys("BUFFER_PG").empty());
    CHECK(db.keys("BUFFER_PROFILE").empty());
    CHECK(db.keys("BUFFER_POOL").empty());
    CHECK(field(db, "PORT_QOS_MAP", "Ethernet0", "pfc_enable") == "3");
}

TEST_CASE("sonic render estimates PG headroom from speed and cable") {
    auto h400 = kiln::network::sonic::estimate_headroom(400000, 5, 9216);
    auto h100 = kiln::network::sonic::estimate_headroom(100000, 5, 9216);
    auto h400long = kiln::network::sonic::estimate_headroom(400000, 300, 9216);
    CHECK(h400.xon == 2 * 9216);
    CHECK(h400.xoff > h100.xoff);
    CHECK(h400long.xoff > h400.xoff);
    CHECK(h400.size == h400.xon + h400.xoff);
}

TEST_CASE("sonic render rejects inconsistent profiles") {
    auto p = roce_profile();
    std::string expect;
    SECTION("CNP on the lossless priority") {
        p.cnp_priority = 3;
        expect = "cnp_priority";
    }
    SECTION("priority out of range") {
        p.lossless_priority = 8;
        expect = "lossless_priority";
    }
    SECTION("DSCP out of range") {
        p.roce_dscp = 64;
        expect = "roce_dscp";
    }
    SECTION("one DSCP for both") {
        p.cnp_dscp = 26;
        expect = "cnp_dscp";
    }
    SECTION("ECN thresholds reversed") {
        p.ecn_min_kb = 2000;
        expect = "ecn_min_kb";
    }
    SECTION("unknown buffer policy") {
        p.buffer_policy = "huge";
        expect = "buffer_policy";
    }
    auto db = render_roce(p, make_ports(2));
    REQUIRE_FALSE(db.ok());
    CHECK(db.error().domain == "network");
    CHECK(db.error().code == "bad-profile");
    CHECK_THAT(db.error().message, Catch::Contains(expect) && Catch::Contains("network profile roce"));

    auto none = render_roce(roce_profile(), {});
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == "no-ports");
}

TEST_CASE("sonic render of a fleet switch uses its nodes' profile") {
    auto fleet = small_fleet();
    fleet.network["roce"].lossless_priority = 4;
    fleet.network["roce"].cnp_priority = 6;
    auto fabric = build_fabric(fleet, {SwitchPorts{"leaf1", cabled_ports(4, "r1", 2)}});
    REQUIRE(fabric.ok());
    auto db = render_switch(fleet, *fabric->find_switch("leaf1"));
    REQUIRE(db.ok());
    CHECK(field(*db, "PORT_QOS_MAP", "Ethernet0", "pfc_enable") == "4");

    fabric->switches[0].os = "nvue";
    auto wrong = render_switch(fleet, fabric->switches[0]);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.error().code == "wrong-os");

    // leaf2 has no ports: the error names the switch.
    auto empty = render_switch(fleet, *fabric->find_switch("leaf2"));
    REQUIRE_FALSE(empty.ok());
    CHECK_THAT(empty.error().message, Catch::Contains("leaf2"));
}

TEST_CASE("sonic render of 4 ports matches the golden file") {
    const std::string path = std::string(KILN_NETWORK_FIXTURES) + "/sonic_roce_4port.json";
    const ConfigDb db = render(roce_profile(), 4);
    const std::string actual = db.json().dump(4) + "\n";
    const char* regen = std::getenv("KILN_REGENERATE");
    if (regen != nullptr && std::string(regen) == "1") {
        std::ofstream(path, std::ios::binary | std::ios::trunc) << actual;
        WARN("regenerated " << path);
    }
    const std::string golden = read_file(path);
    REQUIRE_FALSE(golden.empty());
    // Compared as text so a failure shows both; regenerate with KILN_REGENERATE=1.
    CHECK(actual == golden);
}
