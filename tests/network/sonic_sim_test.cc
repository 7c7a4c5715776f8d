#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "network/sonic/apply/sonic_sim.h"
#include "network/sonic/render.h"
#include "tests/network/network_test_util.h"
#include "tests/network/sonic_test_support.h"

using nlohmann::json;
using namespace kiln::network::sonic;
namespace tn = kiln::test::network;

namespace {

const YangValidator& validator() {
    static YangValidator v = [] {
        auto r = YangValidator::load(KILN_SONIC_YANG_TEST_DIR);
        if (!r) FAIL(r.error().message);
        return std::move(*r);
    }();
    return v;
}

struct SimFixture {
    std::string dir;
    SonicSim sim;
    SimFixture() : dir(make_dir()), sim(dir, validator()) { tn::seed_state(dir); }
    ~SimFixture() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    static std::string make_dir() {
        std::string t = (std::filesystem::temp_directory_path() / "kiln-sonic-sim-XXXXXX").string();
        return mkdtemp(t.data());
    }
    struct Out {
        int rc;
        std::string out, err;
    };
    Out run(std::vector<std::string> args, const std::string& in = {}) {
        std::istringstream i(in);
        std::ostringstream o, e;
        int rc = sim.run(std::move(args), i, o, e);
        return {rc, o.str(), e.str()};
    }
    json config() { return tn::read_json(dir + "/config_db.json"); }
};

}  // namespace

TEST_CASE("the stock 4-port SONiC config is valid for the YANG models") {
    const auto issues = validator().check(tn::stock_config());
    for (const auto& i : issues) UNSCOPED_INFO(i.str());
    CHECK(issues.empty());
}

TEST_CASE("sonic sim prints its CONFIG_DB like sonic-cfggen") {
    SimFixture f;
    auto r = f.run({"sonic-cfggen", "-d", "--print-data"});
    REQUIRE(r.rc == 0);
    CHECK(json::parse(r.out) == tn::stock_config());
    CHECK(f.run({"sonic-cfggen", "-d"}).rc != 0);
    CHECK(f.run({"show", "version"}).rc == 127);
}

TEST_CASE("sonic sim commits a valid patch from stdin") {
    SimFixture f;
    auto r = f.run({"sudo", "config", "apply-patch", "/dev/stdin"},
                   R"([{"op":"replace","path":"/PORT/Ethernet8/mtu","value":"9216"}])");
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(f.config()["PORT"]["Ethernet8"]["mtu"] == "9216");
}

TEST_CASE("sonic sim rejects a patch whose result fails YANG and changes nothing") {
    SimFixture f;
    // The first op is fine; the second is out of range for PORT mtu, the third breaks a reference.
    auto r = f.run({"config", "apply-patch", "-"}, R"([
        {"op":"replace","path":"/PORT/Ethernet0/mtu","value":"9216"},
        {"op":"replace","path":"/PORT/Ethernet4/mtu","value":"99999"},
        {"op":"replace","path":"/PORT_QOS_MAP/Ethernet8/dscp_to_tc_map","value":"NO_SUCH_MAP"}])");
    CHECK(r.rc == 1);
    CHECK(r.err.find("YANG") != std::string::npos);
    CHECK(r.err.find("PORT|Ethernet4") != std::string::npos);
    CHECK(r.err.find("mtu") != std::string::npos);
    CHECK(f.config() == tn::stock_config());
}

TEST_CASE("sonic sim rejects a patch whose operation fails and changes nothing") {
    SimFixture f;
    auto r = f.run({"config", "apply-patch", "-"}, R"([
        {"op":"replace","path":"/PORT/Ethernet0/mtu","value":"9216"},
        {"op":"remove","path":"/PORT/Ethernet99"}])");
    CHECK(r.rc == 1);
    CHECK(r.err.find("patch operation 1") != std::string::npos);
    CHECK(f.config() == tn::stock_config());
    CHECK(f.run({"config", "apply-patch", "-"}, "not json").rc == 1);
    CHECK(f.run({"config", "apply-patch", "/no/such/file"}).rc == 2);
}

TEST_CASE("sonic sim refuses what SONiC's config updater refuses, and changes nothing") {
    SimFixture f;
    SECTION("a port's lanes are create-only") {
        auto r = f.run({"config", "apply-patch", "-"},
                       R"([{"op":"replace","path":"/PORT/Ethernet4/lanes","value":"4,5,6,7,8,9,10,11"}])");
        CHECK(r.rc == 1);
        CHECK(r.err.find("create-only") != std::string::npos);
        CHECK(r.err.find("/PORT/Ethernet4/lanes") != std::string::npos);
    }
    SECTION("a watchdog that detects faster than the switch polls") {
        // As `pfcwd start_default` leaves a switch with many ports.
        REQUIRE(f.run({"config", "apply-patch", "-"},
                      R"([{"op":"replace","path":"/PFC_WD/GLOBAL/POLL_INTERVAL","value":"400"}])")
                    .rc == 1);  // the stock 200 ms detection is already below it: refused too
        CHECK(f.config() == tn::stock_config());
        auto r = f.run({"config", "apply-patch", "-"}, R"([
            {"op":"replace","path":"/PFC_WD/GLOBAL/POLL_INTERVAL","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet0/detection_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet0/restoration_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet4/detection_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet4/restoration_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet8/detection_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet8/restoration_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet12/detection_time","value":"400"},
            {"op":"replace","path":"/PFC_WD/Ethernet12/restoration_time","value":"200"}])");
        CHECK(r.rc == 1);
        CHECK(r.err.find("PFC_WD|Ethernet12") != std::string::npos);
        CHECK(r.err.find("POLL_INTERVAL") != std::string::npos);
    }
    CHECK(f.config() == tn::stock_config());
}

TEST_CASE("sonic sim takes down and up the admin-up ports whose queues, PGs or QoS maps change") {
    SimFixture f;
    auto flaps = [&] {
        std::vector<std::string> out;
        std::ifstream log(f.dir + "/port_flaps.log");
        for (std::string line; std::getline(log, line);) out.push_back(line);
        return out;
    };
    // An MTU change does not take the port down.
    REQUIRE(
        f.run({"config", "apply-patch", "-"}, R"([{"op":"replace","path":"/PORT/Ethernet8/mtu","value":"9216"}])").rc ==
        0);
    CHECK(flaps().empty());
    REQUIRE(f.run({"config", "apply-patch", "-"}, R"([
        {"op":"replace","path":"/PORT/Ethernet4/admin_status","value":"down"},
        {"op":"replace","path":"/PORT_QOS_MAP/Ethernet0/pfc_enable","value":"3"}])")
                .rc == 0);
    CHECK(flaps() == std::vector<std::string>{"Ethernet0"});
    // Ethernet4 is down now: changing its PG does not cycle it.
    REQUIRE(f.run({"config", "apply-patch", "-"}, R"([{"op":"remove","path":"/BUFFER_PG/Ethernet4|0"}])").rc == 0);
    CHECK(flaps() == std::vector<std::string>{"Ethernet0"});
}

TEST_CASE("sonic sim checkpoints, rolls back and deletes checkpoints") {
    SimFixture f;
    REQUIRE(f.run({"config", "checkpoint", "before"}).rc == 0);
    REQUIRE(f.run({"config", "apply-patch", "-"}, R"([{"op":"remove","path":"/PFC_WD/Ethernet0"}])").rc == 0);
    CHECK_FALSE(f.config()["PFC_WD"].contains("Ethernet0"));
    CHECK(json::parse(f.run({"config", "list-checkpoints"}).out) == json::array({"before"}));
    REQUIRE(f.run({"config", "rollback", "before"}).rc == 0);
    CHECK(f.config() == tn::stock_config());
    REQUIRE(f.run({"config", "delete-checkpoint", "before"}).rc == 0);
    CHECK(f.run({"config", "rollback", "before"}).rc == 1);
    CHECK(f.run({"config", "delete-checkpoint", "before"}).rc == 1);
    CHECK(f.run({"config", "checkpoint", "../escape"}).rc == 2);
    CHECK(json::parse(f.run({"config", "list-checkpoints"}).out).empty());
}

TEST_CASE("sonic sim accepts kiln's full render over the stock config") {
    SimFixture f;
    auto db = render_roce(tn::roce_profile(), kiln::network::make_ports(4));
    REQUIRE(db);
    json merged = tn::stock_config();
    for (auto t = db->json().begin(); t != db->json().end(); ++t)
        for (auto e = t->begin(); e != t->end(); ++e) merged[t.key()][e.key()] = *e;
    // The stock ranges overlap kiln's lossless queue and PG.
    for (const char* p : {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"}) {
        merged["QUEUE"].erase(std::string(p) + "|3-4");
        merged["BUFFER_PG"].erase(std::string(p) + "|3-4");
    }
    const auto issues = validator().check(merged);
    for (const auto& i : issues) UNSCOPED_INFO(i.str());
    CHECK(issues.empty());
}

TEST_CASE("split_command_line splits an ssh command on spaces") {
    CHECK(split_command_line("  sudo config  apply-patch /dev/stdin ") ==
          std::vector<std::string>{"sudo", "config", "apply-patch", "/dev/stdin"});
    CHECK(split_command_line("").empty());
}
