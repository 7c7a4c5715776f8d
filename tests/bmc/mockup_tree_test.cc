#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "firmware/bmc/json_reader.h"
#include "firmware/bmc/mockup_tree.h"
#include "tests/bmc/bmc_test_util.h"

using namespace kiln::bmc;
using kiln::bmc::test::ScratchDir;

namespace {
void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
}
}  // namespace

TEST_CASE("mockup tree maps folders to Redfish URIs in both shared mockups") {
    const MockupTree& dmtf = test::mockup("dmtf-public-rackmount1");
    CHECK(dmtf.resources.count("/redfish/v1"));
    CHECK(dmtf.resources.at("/redfish/v1").at("Id") == "RootService");
    CHECK(dmtf.resources.count("/redfish/v1/Systems/437XR1138R2/Bios/Settings"));
    CHECK(dmtf.documents.count("/redfish/v1/$metadata"));
    CHECK(dmtf.resources.size() > 200);

    const MockupTree& hpe = test::mockup("hpe-dl325");
    CHECK(hpe.resources.count("/redfish/v1/Systems/1/bios/settings"));
    CHECK(hpe.resources.at("/redfish/v1/Systems/1").at("PowerState") == "On");
    CHECK(hpe.resources.size() > 700);
}

TEST_CASE("mockup tree refuses a folder without index.json") {
    ScratchDir dir;
    auto tree = MockupTree::load(dir.path());
    REQUIRE_FALSE(tree.ok());
    CHECK(tree.error().code == "bmc.mockup_missing");
}

TEST_CASE("mockup tree names the broken file and enforces its limits") {
    ScratchDir dir;
    write(dir.file("index.json"), R"({"@odata.id": "/redfish/v1"})");
    write(dir.file("Systems/index.json"), R"({"Members": [)");
    auto broken = MockupTree::load(dir.path());
    REQUIRE_FALSE(broken.ok());
    CHECK(broken.error().code == "bmc.json");
    CHECK(broken.error().message.find("Systems/index.json") != std::string::npos);
    CHECK(broken.error().message.find("not valid JSON") != std::string::npos);

    write(dir.file("Systems/index.json"), std::string(40, '[') + std::string(40, ']'));
    MockupLimits shallow;
    shallow.json.max_depth = 16;
    auto deep = MockupTree::load(dir.path(), shallow);
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.error().code == "bmc.json");
    CHECK(deep.error().message.find("nested deeper than 16 levels") != std::string::npos);

    write(dir.file("Systems/index.json"), R"({"Name": ")" + std::string(2000, 'x') + R"("})");
    MockupLimits small;
    small.json.max_bytes = 1000;
    auto big = MockupTree::load(dir.path(), small);
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().code == "bmc.json");
    CHECK(big.error().message.find("over the limit of 1000") != std::string::npos);
}

TEST_CASE("json reader bounds depth and size of request bodies") {
    kiln::JsonLimits limits{64, 3};
    CHECK(parse_json(R"({"a": {"b": 1}})", limits, "body").ok());
    auto deep = parse_json(R"({"a": {"b": {"c": {"d": 1}}}})", limits, "body");
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.error().code == "bmc.json");
    CHECK(deep.error().message.find("nested deeper than 3 levels") != std::string::npos);
    auto large = parse_json(std::string(100, ' ') + "{}", limits, "body");
    REQUIRE_FALSE(large.ok());
    CHECK(large.error().code == "bmc.json");
    CHECK(large.error().message.find("over the limit of 64") != std::string::npos);
    auto bad = parse_json("{nope", limits, "request body");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.rfind("request body", 0) == 0);
}

TEST_CASE("uri normalisation drops trailing and doubled slashes") {
    CHECK(normalize_uri("/redfish/v1/") == "/redfish/v1");
    CHECK(normalize_uri("/redfish//v1/systems/1/bios/") == "/redfish/v1/systems/1/bios");
    CHECK(normalize_uri("/") == "/");
}
