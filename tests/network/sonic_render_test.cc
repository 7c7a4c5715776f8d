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
using kiln::Result;

namespace {

ConfigDb render(const kiln::network::RoceProfile& profile, int ports = 4) {
    auto db = render_roce(profile, cabled_ports(ports, "r1", 2));
    REQUIRE(db.ok());
    return std::move(db).value();
}

std::string field(const ConfigDb& db, const std::string& table, const std::string& key, const std::string& f) {
    return db.get(table, key, f).value_or("<absent>");
}

}  // namespace

namespace {

using kiln::network::sonic::parse_pg_lookup;
using kiln::network::sonic::SonicFacts;

// A switch of a real SKU, as kiln reads it: its headroom table from the
// fixtures (sonic-buildimage's own file), its pool in dynamic mode.
SonicFacts sku_facts(const std::string& sku_dir, const std::string& model = "traditional") {
    SonicFacts f;
    f.buffer_model = model;
    f.pool_mode = "dynamic";
    const std::string path = std::string(KILN_NETWORK_FIXTURES) + "/sonic-device/" + sku_dir + "/pg_profile_lookup.ini";
    auto t = parse_pg_lookup(read_file(path), path);
    REQUIRE(t.ok());
    f.pg_lookup = std::move(*t);
    return f;
}

const char* kSn5600 = "x86_64-nvidia_sn5600-r0/Mellanox-SN5600-O128";       // Spectrum-4
const char* kZ9332f = "x86_64-dellemc_z9332f_d1508-r0/DellEMC-Z9332f-O32";  // Tomahawk 3

Result<ConfigDb> render_on(const SonicFacts& f, const std::vector<kiln::network::Port>& ports,
                           const kiln::network::RoceProfile& p = roce_profile()) {
    kiln::network::sonic::RenderOptions opt;
    opt.facts = &f;
    return render_roce(p, ports, opt);
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
    auto on_switch = render_on(sku_facts(kSn5600), cabled_ports(1, "r1", 1), p);
    REQUIRE(on_switch.ok());
    CHECK(on_switch->has("BUFFER_PG", "Ethernet0|4"));
    CHECK_FALSE(on_switch->has("BUFFER_PG", "Ethernet0|3"));
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
    // On a switch: one lossless PG per port, on the switch's own pool (kiln writes no pool).
    auto on_switch = render_on(sku_facts(kSn5600), cabled_ports(4, "r1", 2));
    REQUIRE(on_switch.ok());
    for (const auto& key : on_switch->keys("BUFFER_PG")) CHECK(key.substr(key.find('|')) == "|3");
    CHECK(on_switch->keys("BUFFER_PG").size() == 4);
    CHECK(field(*on_switch, "BUFFER_PG", "Ethernet0|3", "profile") == "pg_lossless_400000_5m_profile");
    CHECK(field(*on_switch, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "pool") == "ingress_lossless_pool");
    CHECK_FALSE(on_switch->has("BUFFER_POOL", "ingress_lossless_pool"));
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
    // Even with the switch's facts at hand.
    auto f = sku_facts("x86_64-nvidia_sn5600-r0/Mellanox-SN5600-O128");
    kiln::network::sonic::RenderOptions opt;
    opt.facts = &f;
    auto with = render_roce(p, cabled_ports(2, "r1", 2), opt);
    REQUIRE(with.ok());
    CHECK(with->keys("BUFFER_PG").empty());
    CHECK(with->keys("CABLE_LENGTH").empty());
}

TEST_CASE("sonic headroom is the SKU's own row: Spectrum-4 and Tomahawk 3 at 400G") {
    auto ports = cabled_ports(2, "r1", 2);
    SECTION("Mellanox SN5600, 5 m") {
        auto db = render_on(sku_facts(kSn5600), ports);
        REQUIRE(db.ok());
        // Row "400000 5m 250880 19456 231424 0" of the SKU's pg_profile_lookup.ini.
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "xoff") == "231424");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "xon") == "19456");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "size") == "250880");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "dynamic_th") == "0");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "pool") == "ingress_lossless_pool");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "xon_offset") == "<absent>");
        CHECK(field(*db, "BUFFER_PG", "Ethernet0|3", "profile") == "pg_lossless_400000_5m_profile");
        CHECK(field(*db, "CABLE_LENGTH", "AZURE", "Ethernet4") == "5m");
    }
    SECTION("Dell Z9332f, 5 m and a 7 m cable that takes the 40 m row") {
        ports[1].cable_length_m = 7;
        auto db = render_on(sku_facts(kZ9332f), ports);
        REQUIRE(db.ok());
        // "400000 5m 2540 2540 178562 -2 2540": xon_offset and a negative threshold kept.
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "xoff") == "178562");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "xon_offset") == "2540");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "dynamic_th") == "-2");
        // The shortest row at least as long: never less headroom than the cable needs.
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_40m_profile", "xoff") == "201930");
        CHECK(field(*db, "BUFFER_PG", "Ethernet4|3", "profile") == "pg_lossless_400000_40m_profile");
        // CABLE_LENGTH names the row kiln used, so the switch's buffer manager agrees.
        CHECK(field(*db, "CABLE_LENGTH", "AZURE", "Ethernet4") == "40m");
        CHECK(field(*db, "CABLE_LENGTH", "AZURE", "Ethernet0") == "5m");
    }
    SECTION("a static pool names the threshold static_th") {
        auto f = sku_facts(kSn5600);
        f.pool_mode = "static";
        auto db = render_on(f, ports);
        REQUIRE(db.ok());
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "static_th") == "0");
        CHECK(field(*db, "BUFFER_PROFILE", "pg_lossless_400000_5m_profile", "dynamic_th") == "<absent>");
    }
}

TEST_CASE("sonic headroom refuses what the switch could not size") {
    auto ports = cabled_ports(1, "r1", 1);
    SECTION("a cable longer than any row") {
        ports[0].cable_length_m = 3000;
        auto db = render_on(sku_facts(kZ9332f), ports);
        REQUIRE_FALSE(db.ok());
        CHECK(db.error().code == "network.no_headroom_row");
        CHECK_THAT(db.error().message, Catch::Contains("Ethernet0") && Catch::Contains("3000 m") &&
                                           Catch::Contains("5m, 40m, 300m, 1000m, 2000m"));
    }
    SECTION("a speed the table lacks") {
        ports[0].speed_mbps = 25000;
        auto db = render_on(sku_facts(kZ9332f), ports);
        REQUIRE_FALSE(db.ok());
        CHECK(db.error().code == "network.no_headroom_row");
        CHECK_THAT(db.error().message, Catch::Contains("speed 25000") && Catch::Contains("100000, 400000"));
    }
    SECTION("no table in the traditional model") {
        SonicFacts f;
        f.pool_mode = "dynamic";
        f.pg_lookup_path = "/usr/share/sonic/device/p/h/pg_profile_lookup.ini";
        f.pg_lookup_error = "No such file or directory";
        auto db = render_on(f, ports);
        REQUIRE_FALSE(db.ok());
        CHECK(db.error().code == "network.no_headroom_table");
        CHECK_THAT(db.error().message, Catch::Contains(f.pg_lookup_path) && Catch::Contains("buffer_policy"));
    }
    SECTION("no lossless pool") {
        auto f = sku_facts(kSn5600);
        f.pool_mode.clear();
        auto db = render_on(f, ports);
        REQUIRE_FALSE(db.ok());
        CHECK(db.error().code == "network.no_lossless_pool");
    }
}

TEST_CASE("sonic headroom in the dynamic model is left to the switch, from kiln's cable length") {
    auto ports = cabled_ports(2, "r1", 2);
    ports[1].cable_length_m = 7;
    SonicFacts f;
    f.buffer_model = "dynamic";
    f.pool_mode = "dynamic";
    auto db = render_on(f, ports);
    REQUIRE(db.ok());
    CHECK(field(*db, "BUFFER_PG", "Ethernet0|3", "profile") == "NULL");
    CHECK(field(*db, "CABLE_LENGTH", "AZURE", "Ethernet4") == "7m");
    CHECK(db->keys("BUFFER_PROFILE").empty());
}

TEST_CASE("sonic render writes what lossless needs where the switch has it") {
    auto f = sku_facts(kSn5600);
    f.queue_lossless_profile = "egress_lossless_profile";
    f.queue_lossy_profile = "q_lossy_profile";
    f.pfc_to_pg_ports = {"Ethernet0"};
    f.cable_length_key = "CUSTOM";
    auto db = render_on(f, cabled_ports(2, "r1", 2));
    REQUIRE(db.ok());
    CHECK(field(*db, "BUFFER_QUEUE", "Ethernet0|3", "profile") == "egress_lossless_profile");
    CHECK(field(*db, "BUFFER_QUEUE", "Ethernet0|0-2", "profile") == "q_lossy_profile");
    CHECK(field(*db, "BUFFER_QUEUE", "Ethernet0|4-6", "profile") == "q_lossy_profile");
    CHECK(field(*db, "PORT_QOS_MAP", "Ethernet0", "pfc_to_pg_map") == "ROCE");
    CHECK(field(*db, "PORT_QOS_MAP", "Ethernet4", "pfc_to_pg_map") == "<absent>");
    CHECK(field(*db, "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", "ROCE", "3") == "3");
    CHECK(field(*db, "CABLE_LENGTH", "CUSTOM", "Ethernet0") == "5m");

    // Offline (no facts): nothing that depends on the switch.
    const ConfigDb offline = render(roce_profile());
    CHECK(offline.keys("BUFFER_PG").empty());
    CHECK(offline.keys("CABLE_LENGTH").empty());
    CHECK(offline.keys("BUFFER_QUEUE").empty());
}

TEST_CASE("sonic render writes the PFC watchdog's poll interval, and refuses detection below it") {
    auto p = roce_profile();
    p.pfc_watchdog_poll_ms = 150;
    const ConfigDb db = render(p);
    CHECK(field(db, "PFC_WD", "GLOBAL", "POLL_INTERVAL") == "150");
    CHECK(field(db, "PFC_WD", "Ethernet0", "detection_time") == "200");
    p.pfc_watchdog_poll_ms = 400;  // what `pfcwd start_default` sets on a big switch
    auto bad = render_roce(p, make_ports(1));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == "network.bad_profile");
    CHECK_THAT(bad.error().message, Catch::Contains("poll interval (400 ms)"));
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
    CHECK(db.error().code == "network.bad_profile");
    CHECK_THAT(db.error().message, Catch::Contains(expect) && Catch::Contains("network profile roce"));

    auto none = render_roce(roce_profile(), {});
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == "network.no_ports");
}

TEST_CASE("sonic render of a fleet switch uses its nodes' profile") {
    auto fleet = small_fleet();
    kiln::network::mutable_network_profile(fleet, "roce")->lossless_priority = 4;
    kiln::network::mutable_network_profile(fleet, "roce")->cnp_priority = 6;
    auto fabric = build_fabric(fleet, {SwitchPorts{"leaf1", cabled_ports(4, "r1", 2)}});
    REQUIRE(fabric.ok());
    auto db = render_switch(fleet, *fabric->find_switch("leaf1"));
    REQUIRE(db.ok());
    CHECK(field(*db, "PORT_QOS_MAP", "Ethernet0", "pfc_enable") == "4");

    fabric->switches[0].os = "nvue";
    auto wrong = render_switch(fleet, fabric->switches[0]);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.error().code == "network.wrong_os");

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
