// The fleet's fabric keys: switch ports, node NICs, [[cabling]], and the
// RoCE profile checks, each error at its FILE:LINE:COL; and the fabric the
// network stage builds from them.
#include <catch2/catch.hpp>

#include <algorithm>

#include "network/fabric.h"
#include "network/stage/network_inputs.h"
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
    auto net = kiln::network::network_inputs(fleet, fleet.nodes[0]);
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
    CHECK(kiln::network::network_profiles(*ok->loaded.fleet)->at("roce").pfc_priorities == std::vector<int>{5});
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

// ---- node host access and NIC details (the network stage's host side) ----

namespace {

// The two-switch fleet with `host_line` (and optionally `nics_line`) written in node n1.
std::string with_host(const std::string& host_line, const std::string& nics_line = "") {
    auto text = fleet_toml(two_switches(), 1);
    text.replace(text.find("name = \"n1\"\n"), 12, "name = \"n1\"\n" + host_line + "\n" + nics_line);
    return text;
}

}  // namespace

TEST_CASE("host config: ssh, local and netns hosts load, and table NICs with ifname and vfs beside the string form") {
    auto f = write_fleet(with_host(
        "host = { address = \"gpu-01.lab:2222\", username = \"root\", ssh_key = \"keys/id\", known_hosts = "
        "\"keys/kh\", require = [\"pfc\", \"dscp_trust\"], timeout = \"45s\", reboot_timeout = \"20m\" }",
        "nics = [{ name = \"mlx5_0\", ifname = \"ens1f0np0\", vfs = 8, firmware = true, max_acc_out_read = 44 }, "
        "\"mlx5_1\"]\n"));
    INFO(f->errors());
    REQUIRE(f->loaded.fleet);
    const auto& n = f->loaded.fleet->nodes[0];
    CHECK(n.nics[0].max_acc_out_read == 44);
    CHECK_FALSE(n.nics[1].max_acc_out_read);
    CHECK(n.host.mode == "ssh");
    CHECK(n.host.address == "gpu-01.lab:2222");
    CHECK(n.host.describe() == "ssh root@gpu-01.lab:2222");
    CHECK(n.host.ssh_key == f->dir.path() + "/keys/id");
    CHECK(n.host.known_hosts == f->dir.path() + "/keys/kh");
    CHECK(n.host.require == std::vector<std::string>{"pfc", "dscp_trust"});
    CHECK(n.host.timeout == std::chrono::seconds(45));
    CHECK(n.host.reboot_timeout == std::chrono::minutes(20));
    REQUIRE(n.nics.size() == 2);
    CHECK(n.nics[0].netdev() == "ens1f0np0");
    CHECK(n.nics[0].vfs == 8);
    CHECK(n.nics[0].firmware);
    CHECK(n.nics[1].netdev() == "mlx5_1");  // the string form: the name is the netdev
    CHECK_FALSE(n.nics[1].vfs);
    // A managed host is part of the node's network inputs; an unmanaged one adds nothing.
    auto net = kiln::network::network_inputs(*f->loaded.fleet, n);
    CHECK(net["host"]["mode"] == "ssh");
    CHECK(net["host"]["nics"][0]["ifname"] == "ens1f0np0");
    CHECK(net["host"]["nics"][0]["max_acc_out_read"] == 44);
    CHECK_FALSE(net["host"]["nics"][1].contains("max_acc_out_read"));
    auto plain = write_fleet(fleet_toml(two_switches(), 1));
    REQUIRE(plain->loaded.fleet);
    CHECK_FALSE(kiln::network::network_inputs(*plain->loaded.fleet, plain->loaded.fleet->nodes[0]).contains("host"));
    CHECK_FALSE(plain->loaded.fleet->nodes[0].host.managed());

    auto local = write_fleet(with_host("host = { local = true }"));
    REQUIRE(local->loaded.fleet);
    CHECK(local->loaded.fleet->nodes[0].host.describe() == "local");
    auto ns = write_fleet(with_host("host = { netns = \"lab-gpu-01\" }"));
    REQUIRE(ns->loaded.fleet);
    CHECK(ns->loaded.fleet->nodes[0].host.describe() == "netns lab-gpu-01");
}

TEST_CASE("host config: [defaults] host merges key by key, a node's way in replaces the default's") {
    auto text = fleet_toml(two_switches(), 2);
    text.replace(text.find("[defaults]\n"), 11,
                 "[defaults]\nhost = { username = \"root\", known_hosts = \"kh\", require = [\"mtu\"] }\n");
    text.replace(text.find("name = \"n1\"\n"), 12, "name = \"n1\"\nhost = { address = \"10.0.0.21\" }\n");
    text.replace(text.find("name = \"n2\"\n"), 12, "name = \"n2\"\nhost = { netns = \"rehearse-n2\" }\n");
    auto f = write_fleet(text);
    INFO(f->errors());
    REQUIRE(f->loaded.fleet);
    const auto& n1 = f->loaded.fleet->nodes[0];
    CHECK(n1.host.describe() == "ssh root@10.0.0.21");
    CHECK(n1.host.known_hosts == f->dir.path() + "/kh");
    CHECK(n1.host.require == std::vector<std::string>{"mtu"});
    CHECK(f->loaded.fleet->nodes[1].host.describe() == "netns rehearse-n2");
}

TEST_CASE("host config: bad host tables are refused at FILE:LINE:COL") {
    SECTION("two ways in") {
        const auto text = with_host("host = { address = \"10.0.0.5\", netns = \"x\", known_hosts = \"kh\" }");
        auto f = write_fleet(text);
        INFO(f->errors());
        REQUIRE_FALSE(f->loaded.fleet);
        CHECK(f->loaded.errors[0].key == "nodes[0].host.address");
        CHECK_THAT(f->loaded.errors[0].message,
                   Catch::Contains("expected one of address (SSH), local = true or netns, not several"));
        CHECK(f->loaded.errors[0].pos.line == line_of(text, "host = {"));
        CHECK(f->loaded.errors[0].pos.column == 8);
    }
    SECTION("ssh without known_hosts") {
        auto f = write_fleet(with_host("host = { address = \"10.0.0.5\" }"));
        expect_error(*f, "nodes[0].host.known_hosts", "required with address: kiln checks SSH host keys strictly");
    }
    SECTION("a user in the address") {
        auto f = write_fleet(with_host("host = { address = \"root@10.0.0.5\", known_hosts = \"kh\" }"));
        expect_error(*f, "nodes[0].host.address", "expected HOST or HOST:PORT; write the user in username");
    }
    SECTION("a bad port") {
        auto f = write_fleet(with_host("host = { address = \"h:70000\", known_hosts = \"kh\" }"));
        expect_error(*f, "nodes[0].host.address", "expected HOST or HOST:PORT (IPv6 as [ADDR] or [ADDR]:PORT)");
    }
    SECTION("SSH keys beside netns") {
        const auto text = with_host("host = { netns = \"x\", username = \"root\" }");
        auto f = write_fleet(text);
        expect_error(*f, "nodes[0].host.username", "only used with address (SSH)");
        CHECK(f->loaded.errors[0].pos.line == line_of(text, "username = \"root\""));
        CHECK(f->loaded.errors[0].pos.column == 34);
    }
    SECTION("local = false") {
        auto f = write_fleet(with_host("host = { local = false }"));
        INFO(f->errors());
        REQUIRE(f->loaded.errors.size() == 2);
        CHECK(f->loaded.errors[0].key == "nodes[0].host");
        CHECK_THAT(f->loaded.errors[0].message, Catch::Contains("expected address, local = true or netns"));
        CHECK(f->loaded.errors[1].key == "nodes[0].host.local");
        CHECK_THAT(f->loaded.errors[1].message, Catch::Contains("expected true; leave local out"));
    }
    SECTION("an unknown key, and no way in") {
        auto f = write_fleet(with_host("host = { adress = \"10.0.0.5\" }"));
        INFO(f->errors());
        REQUIRE(f->loaded.errors.size() == 2);
        CHECK(f->loaded.errors[0].key == "nodes[0].host");
        CHECK(f->loaded.errors[1].key == "nodes[0].host.adress");
        CHECK_THAT(f->loaded.errors[1].message, Catch::Contains("unknown key 'adress'; expected one of: address"));
    }
    SECTION("an unknown require") {
        auto f = write_fleet(with_host("host = { local = true, require = [\"pfc\", \"dcb\"] }"));
        expect_error(*f, "nodes[0].host.require[1]",
                     "expected one of mtu, sriov, dscp_trust, pfc, ecn, firmware, found \"dcb\"");
    }
    SECTION("a bad namespace name") {
        auto f = write_fleet(with_host("host = { netns = \"../etc\" }"));
        expect_error(*f, "nodes[0].host.netns", "expected a network namespace name");
    }
    SECTION("host written as a string") {
        auto f = write_fleet(with_host("host = \"10.0.0.5\""));
        expect_error(*f, "nodes[0].host", "expected table, found string");
    }
}

TEST_CASE("host config: bad NIC tables are refused at FILE:LINE:COL") {
    SECTION("an interface name Linux cannot have") {
        const auto text = with_host("", "nics = [{ name = \"mlx5_0\", ifname = \"ens1/0\" }, \"mlx5_1\"]\n");
        auto f = write_fleet(text);
        expect_error(*f, "nodes[0].nics[0].ifname", "expected an interface name: 1 to 15 letters");
        CHECK(f->loaded.errors[0].pos.line == line_of(text, "ifname"));
        CHECK(f->loaded.errors[0].pos.column == 37);
    }
    SECTION("firmware without vfs") {
        auto f = write_fleet(with_host("", "nics = [{ name = \"mlx5_0\", firmware = true }, \"mlx5_1\"]\n"));
        expect_error(*f, "nodes[0].nics[0].firmware", "needs vfs: the firmware's NUM_OF_VFS is checked against it");
    }
    SECTION("max_acc_out_read without firmware") {
        auto f =
            write_fleet(with_host("", "nics = [{ name = \"mlx5_0\", vfs = 8, max_acc_out_read = 44 }, \"mlx5_1\"]\n"));
        expect_error(*f, "nodes[0].nics[0].max_acc_out_read",
                     "needs firmware = true: it is a ConnectX firmware setting");
    }
    SECTION("a table without a name") {
        auto f = write_fleet(with_host("", "nics = [{ ifname = \"ens1f0\" }, \"mlx5_0\", \"mlx5_1\"]\n"));
        expect_error(*f, "nodes[0].nics[0].name", "required key is missing");
    }
    SECTION("an unknown NIC key") {
        auto f = write_fleet(with_host("", "nics = [{ name = \"mlx5_0\", vf = 8 }, \"mlx5_1\"]\n"));
        expect_error(*f, "nodes[0].nics[0].vf",
                     "unknown key 'vf'; expected one of: firmware, ifname, max_acc_out_read, name, vfs");
    }
    SECTION("neither a name nor a table") {
        auto f = write_fleet(with_host("", "nics = [0, \"mlx5_0\", \"mlx5_1\"]\n"));
        expect_error(*f, "nodes[0].nics[0]", "expected a NIC name or a table { name, ifname, vfs, firmware }");
    }
    SECTION("two NICs on one interface") {
        auto f = write_fleet(with_host("", "nics = [{ name = \"mlx5_0\", ifname = \"mlx5_1\" }, \"mlx5_1\"]\n"));
        INFO(f->errors());
        // The refused NIC is then missing for its cable too.
        REQUIRE(f->loaded.errors.size() == 2);
        CHECK(f->loaded.errors[0].key == "nodes[0].nics[1]");
        CHECK_THAT(f->loaded.errors[0].message, Catch::Contains("interface mlx5_1 is NIC mlx5_0's already (first at"));
        CHECK(f->loaded.errors[1].key == "cabling[1].nic");
    }
}

namespace {

// leaf-a and leaf-b (n1 on the first port of each) and a spine, with
// leaf-a swp3 -> spine-1 Ethernet0 and leaf-b Ethernet2/1 -> spine-1
// Ethernet4 (100 m).
std::vector<SwitchDecl> leaves_and_spine() {
    auto sw = two_switches();
    sw.push_back({"spine-1", "sonic", "127.0.0.1:22", {"Ethernet0", "Ethernet4", "Ethernet8"}, true});
    return sw;
}

std::string spine_fleet() {
    return fleet_toml(leaves_and_spine(), 1) + uplink_toml("leaf-a", "swp3", "spine-1", "Ethernet0") +
           uplink_toml("leaf-b", "Ethernet2/1", "spine-1", "Ethernet4", "cable_length_m = 100\n");
}

}  // namespace

TEST_CASE("fabric config: [[uplinks]] load into the fleet, both ends of the fabric, and the node's inputs") {
    auto f = write_fleet(spine_fleet());
    INFO(f->errors());
    REQUIRE(f->loaded.fleet);
    const auto& fleet = *f->loaded.fleet;
    REQUIRE(fleet.uplinks.size() == 2);
    CHECK(fleet.uplinks[0].switch_name == "leaf-a");
    CHECK(fleet.uplinks[0].port == "swp3");
    CHECK(fleet.uplinks[0].peer_switch == "spine-1");
    CHECK(fleet.uplinks[0].peer_port == "Ethernet0");
    CHECK(fleet.uplinks[0].cable_length_m == 0);
    CHECK(fleet.uplinks[1].cable_length_m == 100);
    CHECK(fleet.uplinks[1].pos.line == line_of(spine_fleet(), "[[uplinks]]", 2));
    CHECK(fleet.cabling.size() == 2);  // nothing cabled to the spine

    auto fabric = kiln::network::build_fabric(fleet);
    REQUIRE(fabric);
    const auto* leaf_port = fabric->find_switch("leaf-a")->find_port("swp3");
    REQUIRE(leaf_port->uplink);
    CHECK(leaf_port->uplink->switch_name == "spine-1");
    CHECK(leaf_port->uplink->port == "Ethernet0");
    CHECK(kiln::network::cable_length_of(*leaf_port) == 40);
    const auto* spine = fabric->find_switch("spine-1");
    REQUIRE(spine->find_port("Ethernet4")->uplink);
    CHECK(spine->find_port("Ethernet4")->uplink->switch_name == "leaf-b");
    CHECK(kiln::network::cable_length_of(*spine->find_port("Ethernet4")) == 100);
    CHECK_FALSE(spine->find_port("Ethernet8")->cabled());

    // Both ends of each of the node's leaves' uplinks are its inputs.
    auto net = kiln::network::network_inputs(fleet, fleet.nodes[0]);
    REQUIRE(net["uplinks"].size() == 2);
    CHECK(net["uplinks"][0]["end"]["switch"]["name"] == "leaf-a");
    CHECK(net["uplinks"][0]["end"]["port"]["name"] == "swp3");
    CHECK(net["uplinks"][0]["peer"]["switch"]["name"] == "spine-1");
    CHECK(net["uplinks"][0]["peer"]["port"]["speed_mbps"] == 400000);
    CHECK_FALSE(net["uplinks"][0].contains("cable_length_m"));
    CHECK(net["uplinks"][1]["cable_length_m"] == 100);

    // A longer uplink changes the node's inputs; a fleet without uplinks keeps its old ones.
    auto longer = spine_fleet();
    longer.replace(longer.find("cable_length_m = 100"), 20, "cable_length_m = 300");
    auto g = write_fleet(longer);
    REQUIRE(g->loaded.fleet);
    CHECK(kiln::network::network_inputs(*g->loaded.fleet, g->loaded.fleet->nodes[0]) != net);
    auto plain = write_fleet(fleet_toml(two_switches(), 1));
    REQUIRE(plain->loaded.fleet);
    CHECK_FALSE(kiln::network::network_inputs(*plain->loaded.fleet, plain->loaded.fleet->nodes[0]).contains("uplinks"));
}

TEST_CASE("fabric config: an uplink on a port cabled to a node is refused at the uplink, naming the cable") {
    const auto text = fleet_toml(leaves_and_spine(), 1) + uplink_toml("leaf-a", "swp1", "spine-1", "Ethernet0");
    auto f = write_fleet(text);
    expect_error(*f, "uplinks[0].port", "switch port leaf-a swp1 is cabled twice (first at");
    CHECK(f->loaded.errors[0].pos.line == line_of(text, "port = \"swp1\"", 2));
    CHECK_THAT(f->loaded.errors[0].message, Catch::Contains(":" + std::to_string(line_of(text, "port = \"swp1\""))));
}

TEST_CASE("fabric config: a spine port taken by two uplinks is refused at the second") {
    const auto text = fleet_toml(leaves_and_spine(), 1) + uplink_toml("leaf-a", "swp3", "spine-1", "Ethernet0") +
                      uplink_toml("leaf-b", "Ethernet2/1", "spine-1", "Ethernet0");
    auto f = write_fleet(text);
    expect_error(*f, "uplinks[1].peer_port", "switch port spine-1 Ethernet0 is cabled twice (first at");
    CHECK(f->loaded.errors[0].pos.line == line_of(text, "peer_port = \"Ethernet0\"", 2));
}

TEST_CASE("fabric config: uplink errors name the key: unknown switch, undeclared port, self loop, bad keys") {
    const auto base = fleet_toml(leaves_and_spine(), 1);
    auto unknown = write_fleet(base + uplink_toml("leaf-a", "swp3", "spine-9", "Ethernet0"));
    expect_error(*unknown, "uplinks[0].peer_switch", "no switch 'spine-9'; defined: leaf-a, leaf-b, spine-1");

    auto no_port = write_fleet(base + uplink_toml("leaf-a", "swp3", "spine-1", "Ethernet96"));
    expect_error(*no_port, "uplinks[0].peer_port",
                 "switch spine-1 has no port 'Ethernet96' (declare it in switches.spine-1.ports)");

    auto near_port = write_fleet(base + uplink_toml("leaf-a", "swp9", "spine-1", "Ethernet0"));
    expect_error(*near_port, "uplinks[0].port", "switch leaf-a has no port 'swp9'");

    auto loop = write_fleet(base + uplink_toml("spine-1", "Ethernet0", "spine-1", "Ethernet4"));
    expect_error(*loop, "uplinks[0].peer_switch", "an uplink joins two switches; both ends are on spine-1");

    auto key = write_fleet(base + uplink_toml("leaf-a", "swp3", "spine-1", "Ethernet0", "colour = \"blue\"\n"));
    expect_error(*key, "uplinks[0].colour", "unknown key 'colour'");

    auto missing = write_fleet(base + "[[uplinks]]\nswitch = \"leaf-a\"\nport = \"swp3\"\npeer_switch = \"spine-1\"\n");
    expect_error(*missing, "uplinks[0].peer_port", "required key is missing");

    auto length = write_fleet(base + uplink_toml("leaf-a", "swp3", "spine-1", "Ethernet0", "cable_length_m = 0\n"));
    expect_error(*length, "uplinks[0].cable_length_m", "");
}
