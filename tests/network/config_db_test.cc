#include <catch2/catch.hpp>

#include "network/sonic/config_db.h"

using kiln::network::sonic::ConfigDb;
using kiln::network::sonic::join_key;
using kiln::network::sonic::split_key;
using nlohmann::json;

TEST_CASE("config db keys join and split on the bar") {
    CHECK(join_key({"Ethernet0", "3"}) == "Ethernet0|3");
    CHECK(join_key({"ROCE"}) == "ROCE");
    CHECK(split_key("Ethernet0|3") == std::vector<std::string>{"Ethernet0", "3"});
    CHECK(split_key("global") == std::vector<std::string>{"global"});
    CHECK(split_key("a||b") == std::vector<std::string>{"a", "", "b"});
}

TEST_CASE("config db reads back what was set") {
    ConfigDb db;
    db.set("PORT", "Ethernet0", "mtu", "9216");
    db.set("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "3");
    db.touch("QUEUE", "Ethernet0|3");
    CHECK(db.get("PORT", "Ethernet0", "mtu") == "9216");
    CHECK_FALSE(db.get("PORT", "Ethernet0", "speed").has_value());
    CHECK_FALSE(db.get("PORT", "Ethernet4", "mtu").has_value());
    CHECK_FALSE(db.get("NOPE", "x", "y").has_value());
    CHECK(db.has("QUEUE", "Ethernet0|3"));
    CHECK(db.json()["QUEUE"]["Ethernet0|3"].is_object());
    // Sorted as Redis would list them: '_' sorts before '|'.
    CHECK(db.redis_keys() == std::vector<std::string>{"PORT_QOS_MAP|Ethernet0", "PORT|Ethernet0", "QUEUE|Ethernet0|3"});
}

TEST_CASE("config db checks the shape of config_db.json") {
    CHECK(ConfigDb::from_json(json::parse(R"({"PORT": {"Ethernet0": {"mtu": "9216"}}})")).ok());
    CHECK(ConfigDb::from_json(json::parse(R"({"PORT": {"Ethernet0": {"adv_speeds": ["1000", "all"]}}})")).ok());
    auto number = ConfigDb::from_json(json::parse(R"({"PORT": {"Ethernet0": {"mtu": 9216}}})"));
    REQUIRE_FALSE(number.ok());
    CHECK(number.error().message == "PORT|Ethernet0: mtu: a value must be a string or a list of strings");
    CHECK_FALSE(ConfigDb::from_json(json::parse(R"({"PORT": ["Ethernet0"]})")).ok());
    CHECK_FALSE(ConfigDb::from_json(json::parse(R"({"PORT": {"Ethernet0": "up"}})")).ok());
    CHECK_FALSE(ConfigDb::from_json(json::array()).ok());
    auto db = ConfigDb::from_json(json::parse(R"({"PFC_WD": {"Ethernet0": {"action": "drop"}}})"));
    REQUIRE(db.ok());
    CHECK(db->get("PFC_WD", "Ethernet0", "action") == "drop");
}
