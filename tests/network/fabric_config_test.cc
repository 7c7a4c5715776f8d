// The fleet's fabric keys: switch ports, node NICs, [[cabling]], and the
// RoCE profile checks, each error at its FILE:LINE:COL; and the fabric the
// network stage builds from them.
#include <catch2/catch.hpp>

#include <algorithm>

#include "network/fabric.h"
#include "tests/network/fabric_test_util.h"

using namespace kiln::test::fabric;

namespace {

std::vector<SwitchDecl> two_switches() {
    return {{"leaf-a", "nvue", "http://127.0.0.1:1", {"swp1", "swp2", "swp3"}},
            {"leaf-b", "eos", "http://127.0.0.1:2", {"Ethernet1/1", "Ethernet2/1"}}};
}

// The one diagnostic of `f`, which must say `text` about `key`.
void expect_error(const FleetFile& f, const std::string& key, const std::string& text) {
    INFO(f.errors());
    REQUIRE(f.loaded.errors.size() == 1);
    const auto& d = f.loaded.errors.front();
    CHECK(d.key == key);
    CHECK_THAT(d.message, Catch::Contains(text));
    CHECK(d.pos.file == f.path);
    CHECK(d.pos.line > 0);
    CHECK(d.pos.column > 0);
    CHECK_FALSE(f.loaded.fleet.has_value());
}

// Line (1-based) of the n-th occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle, int nth = 1) {
    size_t at = 0;
    for (int i = 0; i < nth; ++i) {
        at = text.find(needle, i ? at + 1 : 0);
        REQUIRE(at != std::string::npos);
    }
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
}

}  // namespace

TEST_CASE("fabric config: ports, nics and cabling load into the fleet and the fabric") {
    auto f = write_fleet(fleet_toml(two_switches(), 2));
    INFO(f->errors());
    REQUIRE(f->loaded.fleet);
    const auto& fleet = *f->loaded.fleet;
    REQUIRE(fleet.switches.size() == 2);
    CHECK(fleet.switches[0].ports.size() == 3);
    CHECK(fleet.switches[0].ports[1].name == "swp2");
    CHECK(fleet.switches[0].ports[1].lanes == "4,5,6,7");
    REQUIRE(fleet.nodes.size() == 2);
    REQUIRE(fleet.nodes[0].nics.size() == 2);  // from [defaults]
    CHECK(fleet.nodes[0].nics[0].name == "mlx5_0");
    CHECK(fleet.cabling.size() == 4);
    CHECK(fleet.cables_of("n2").size() == 2);

    auto fabric = kiln::network::build_fabric(fleet);
    REQUIRE(fabric);
    const auto* a = fabric->find_switch("leaf-a");
    REQUIRE(a);
    REQUIRE(a->find_port("swp2"));
    REQUIRE(a->find_port("swp2")->peer);
    CHECK(a->find_port("swp2")->peer->node == "n2");
    CHECK(a->find_port("swp2")->peer->nic == "mlx5_0");
    CHECK(fabric->find_switch("leaf-b")->find_port("Ethernet2/1")->peer->nic == "mlx5_1");
    CHECK_FALSE(a->find_port("swp3")->peer);  // declared, not cabled

    // A node's network inputs carry its cables, so recabling re-runs the stage.
    auto net = kiln::config::node_section_json(fleet, fleet.nodes[0], "network");
    REQUIRE(net["cables"].size() == 2);
    CHECK(net["cables"][0]["port"]["name"] == "swp1");
    CHECK(net["cables"][0]["switch"]["name"] == "leaf-a");
}

TEST_CASE("fabric config: a switch port cabled twice is refused at the second, naming the first") {
    auto text = fleet_toml(two_switches(), 1) +
                "[[cabling]]\nnode = \"n1\"\nnic = \"mlx5_2\"\nswitch = \"leaf-a\"\nport = \"swp1\"\n";
    text.replace(text.find("nics = [\"mlx5_0\", \"mlx5_1\"]"), 27, "nics = [\"mlx5_0\", \"mlx5_1\", \"mlx5_2\"]");
    auto f = write_fleet(text);
    expect_error(*f, "cabling[2].port", "switch port leaf-a swp1 is cabled twice (first at");
    CHECK(f->loaded.errors[0].pos.line == line_of(text, "port = \"swp1\"", 2));
    CHECK(f->loaded.errors[0].pos.column == 8);
}

TEST_CASE("fabric config: cabling to an unknown switch lists the defined ones") {
    auto text = fleet_toml(two_switches(), 1) +
                "[[cabling]]\nnode = \"n1\"\nnic = \"mlx5_2\"\nswitch = \"leaf-z\"\nport = \"swp9\"\n";
    text.replace(text.find("nics = [\"mlx5_0\", \"mlx5_1\"]"), 27, "nics = [\"mlx5_0\", \"mlx5_1\", \"mlx5_2\"]");
    auto f = write_fleet(text);
    expect_error(*f, "cabling[2].switch", "no switch 'leaf-z'; defined: leaf-a, leaf-b");
    CHECK(f->loaded.errors[0].pos.line == line_of(text, "switch = \"leaf-z\""));
}

TEST_CASE("fabric config: cabling from a NIC the node lacks names the node's NICs") {
    auto text = fleet_toml(two_switches(), 1) +
                "[[cabling]]\nnode = \"n1\"\nnic = \"mlx5_7\"\nswitch = \"leaf-a\"\nport = \"swp3\"\n";
    auto f = write_fleet(text);
    expect_error(*f, "cabling[2].nic", "node n1 has no NIC 'mlx5_7'; its nics: mlx5_0, mlx5_1");
}

TEST_CASE("fabric config: cabling to a port the switch does not declare") {
    auto text = fleet_toml(two_switches(), 1) +
                "[[cabling]]\nnode = \"n1\"\nnic = \"mlx5_0\"\nswitch = \"leaf-b\"\nport = \"Ethernet9/1\"\n";
    auto f = write_fleet(text);
    // Also the NIC's second cable: both are reported.
    INFO(f->errors());
    REQUIRE(f->loaded.errors.size() == 2);
    CHECK(f->loaded.errors[0].key == "cabling[2].nic");
    CHECK_THAT(f->loaded.errors[0].message, Catch::Contains("NIC mlx5_0 of node n1 is cabled twice"));
    CHECK(f->loaded.errors[1].key == "cabling[2].port");
    CHECK_THAT(f->loaded.errors[1].message, Catch::Contains("switch leaf-b has no port 'Ethernet9/1'"));
}

TEST_CASE("fabric config: cabling from an unknown node, a duplicate port and bad lanes") {
    auto f = write_fleet(fleet_toml(two_switches(), 1) +
                         "[[cabling]]\nnode = \"n9\"\nnic = \"mlx5_0\"\nswitch = \"leaf-a\"\nport = \"swp3\"\n");
    expect_error(*f, "cabling[2].node", "no node 'n9'; defined: n1");

    auto sw = two_switches();
    sw[0].ports = {"swp1", "swp1"};
    auto g = write_fleet(fleet_toml(sw, 1));
    expect_error(*g, "switches.leaf-a.ports[1].name", "duplicate port 'swp1' on switch leaf-a (first at");

    auto text = fleet_toml(two_switches(), 1);
    text.replace(text.find("lanes = \"0,1,2,3\""), 17, "lanes = \"0-3\"");
    auto h = write_fleet(text);
    expect_error(*h, "switches.leaf-a.ports[0].lanes", "expected lane numbers separated by commas");
}

TEST_CASE("fabric config: PFC on a priority that carries no RoCE traffic is refused") {
    const std::string text = fleet_toml(two_switches(), 1, "lossless_priority = 3\npfc_priorities = [3, 4]\n");
    auto f = write_fleet(text);
    expect_error(*f, "network.roce.pfc_priorities[1]",
                 "PFC on priority 4 which carries no RoCE traffic (roce_dscp 26 maps to lossless_priority 3)");
    CHECK(f->loaded.errors[0].pos.line == line_of(text, "pfc_priorities"));
    CHECK(f->loaded.errors[0].pos.column == 22);

    auto ok = write_fleet(fleet_toml(two_switches(), 1, "lossless_priority = 5\ncnp_priority = 6\n"));
    REQUIRE(ok->loaded.fleet);
    CHECK(ok->loaded.fleet->network.at("roce").pfc_priorities == std::vector<int>{5});
}

TEST_CASE("fabric config: an MTU below RoCE's 1024 says why") {
    auto f = write_fleet(fleet_toml(two_switches(), 1, "host_mtu = 900\n"));
    expect_error(*f, "network.roce.host_mtu", "found 900: below 1024, the smallest MTU RoCE runs on");
    auto g = write_fleet(fleet_toml(two_switches(), 1, "switch_mtu = 512\n"));
    expect_error(*g, "network.roce.switch_mtu", "found 512: below 1024");
}

TEST_CASE("fabric config: a NIC listed twice on a node") {
    auto text = fleet_toml({two_switches()[0]}, 1);
    text.replace(text.find("nics = [\"mlx5_0\"]"), 17, "nics = [\"mlx5_0\", \"mlx5_0\"]");
    auto f = write_fleet(text);
    expect_error(*f, "defaults.nics[1]", "NIC 'mlx5_0' is listed twice");
}
