// The one JSON reader for what comes from the wire or a tool: each limit
// refuses what passes it, with the source and the limit named and the text
// itself never quoted.
#include <catch2/catch.hpp>

#include "provisioner/core/json_limits.h"

using kiln::JsonLimits;
using kiln::parse_json_limited;

TEST_CASE("json limits: size, depth and value count each refuse what passes them", "[json]") {
    JsonLimits limits{1000, 4, 50};
    auto ok = parse_json_limited(R"({"a": [1, 2, {"b": "x,y[{"}]})", "GET /r", limits, "redfish");
    REQUIRE(ok.ok());
    CHECK((*ok)["a"][2]["b"] == "x,y[{");  // separators and brackets inside strings are not counted

    auto big = parse_json_limited("[" + std::string(1200, ' ') + "]", "GET /big", limits, "redfish");
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().code == "redfish.json");
    CHECK(big.error().message == "GET /big: 1202 bytes of JSON, over the limit of 1000");

    auto deep = parse_json_limited("[[[[[1]]]]]", "ip -j link", limits, "network");
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.error().code == "network.json");
    CHECK(deep.error().message == "ip -j link: JSON nested deeper than 4 levels");
    CHECK(parse_json_limited("[[[[1]]]]", "ip -j link", limits, "network").ok());

    std::string many = "[0";
    for (int i = 0; i < 60; ++i) many += ",0";
    many += "]";
    auto wide = parse_json_limited(many, "the guest agent", limits, "smoke");
    REQUIRE_FALSE(wide.ok());
    CHECK(wide.error().code == "smoke.json");
    CHECK(wide.error().message.find("the guest agent: JSON of more than 50 values") == 0);
}

TEST_CASE("json limits: malformed text and numbers past a double come back as errors, not exceptions", "[json]") {
    auto bad = parse_json_limited(R"({"password": "hunter2", )", "POST /login", {}, "bmc");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == "bmc.json");
    CHECK(bad.error().message.find("POST /login: not valid JSON (at byte") == 0);
    CHECK(bad.error().message.find("hunter2") == std::string::npos);  // never quoted

    auto huge = parse_json_limited(R"({"n": 1e400})", "GET /n", {}, "redfish");
    REQUIRE_FALSE(huge.ok());
    CHECK(huge.error().message == "GET /n: JSON holds a number out of range (over about 1.8e308)");

    auto empty = parse_json_limited("", "qemu-img info", {}, "vm");
    REQUIRE_FALSE(empty.ok());
    CHECK(empty.error().code == "vm.json");
}
