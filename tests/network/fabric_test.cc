#include <map>

#include <catch2/catch.hpp>

#include "network/fabric.h"
#include "network/switch_scope.h"
#include "tests/network/network_test_util.h"

using kiln::network::build_fabric;
using kiln::network::make_ports;
using kiln::network::profile_for_switch;
using kiln::network::SwitchPorts;
using namespace kiln::test::network;

TEST_CASE("fabric make_ports numbers ports by their first lane") {
    auto ports = make_ports(3);
    REQUIRE(ports.size() == 3);
    CHECK(ports[0].name == "Ethernet0");
    CHECK(ports[1].name == "Ethernet4");
    CHECK(ports[2].name == "Ethernet8");
    CHECK(ports[1].lanes == "4,5,6,7");
    CHECK(ports[2].speed_mbps == 400000);
    CHECK_FALSE(ports[0].peer.has_value());

    auto two_lane = make_ports(2, 100000, 2);
    CHECK(two_lane[1].name == "Ethernet2");
    CHECK(two_lane[1].lanes == "2,3");
    CHECK(make_ports(0).empty());
}

TEST_CASE("fabric holds every fleet switch with its rack and ports") {
    auto fleet = small_fleet();
    auto fabric = build_fabric(fleet, {SwitchPorts{"leaf1", cabled_ports(4, "r1", 2)}});
    REQUIRE(fabric.ok());
    REQUIRE(fabric->switches.size() == 2);
    const auto* leaf1 = fabric->find_switch("leaf1");
    REQUIRE(leaf1 != nullptr);
    CHECK(leaf1->rack == "r1");
    CHECK(leaf1->os == "sonic");
    CHECK(leaf1->ports.size() == 4);
    REQUIRE(leaf1->find_port("Ethernet4") != nullptr);
    CHECK(leaf1->find_port("Ethernet4")->peer->node == "r1n2");
    CHECK(fabric->find_switch("leaf2")->ports.empty());
    CHECK(fabric->find_switch("spine9") == nullptr);
}

TEST_CASE("fabric rejects ports that do not fit the fleet") {
    auto fleet = small_fleet();
    SECTION("unknown switch") {
        auto f = build_fabric(fleet, {SwitchPorts{"spine9", make_ports(1)}});
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.unknown_switch");
        CHECK_THAT(f.error().message, Catch::Contains("spine9"));
    }
    SECTION("duplicate port") {
        auto ports = make_ports(2);
        ports[1].name = "Ethernet0";
        auto f = build_fabric(fleet, {SwitchPorts{"leaf1", ports}});
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.duplicate_port");
        CHECK_THAT(f.error().message, Catch::Contains("leaf1") && Catch::Contains("Ethernet0"));
    }
    SECTION("cable to an unknown node") {
        auto ports = make_ports(1);
        ports[0].peer = kiln::network::Cable{"ghost", "mlx5_0"};
        auto f = build_fabric(fleet, {SwitchPorts{"leaf1", ports}});
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.unknown_node");
        CHECK_THAT(f.error().message, Catch::Contains("Ethernet0") && Catch::Contains("ghost"));
    }
    SECTION("bad speed") {
        auto ports = make_ports(1);
        ports[0].speed_mbps = 0;
        auto f = build_fabric(fleet, {SwitchPorts{"leaf1", ports}});
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.bad_port");
    }
    SECTION("one switch given twice") {
        auto f = build_fabric(fleet, {SwitchPorts{"leaf1", make_ports(1)}, SwitchPorts{"leaf1", make_ports(1)}});
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.duplicate_switch");
    }
}

TEST_CASE("fabric finds the profile a switch must carry") {
    auto fleet = small_fleet();
    kiln::network::RoceProfile other = roce_profile();
    other.name = "other";
    other.lossless_priority = 4;
    kiln::network::add_network_profile(fleet, other);

    auto fabric = build_fabric(fleet, {SwitchPorts{"leaf1", cabled_ports(4, "r1", 2)}});
    REQUIRE(fabric.ok());
    auto p = profile_for_switch(fleet, *fabric->find_switch("leaf1"));
    REQUIRE(p.ok());
    CHECK((*p)->name == "roce");

    SECTION("nodes that disagree are an error") {
        fleet.nodes[1].set_profile("network", "other");
        auto q = profile_for_switch(fleet, *fabric->find_switch("leaf1"));
        REQUIRE_FALSE(q.ok());
        CHECK(q.error().code == "network.profile_conflict");
        CHECK_THAT(q.error().message, Catch::Contains("r1n1") && Catch::Contains("r1n2"));
    }
    SECTION("a switch without cabled nodes needs a single fleet profile") {
        auto q = profile_for_switch(fleet, *fabric->find_switch("leaf2"));
        REQUIRE_FALSE(q.ok());
        CHECK(q.error().code == "network.no_profile");
        std::any_cast<kiln::config::Profiles<kiln::network::RoceProfile>&>(fleet.tables.at("network").value)
            .erase("other");
        auto r = profile_for_switch(fleet, *fabric->find_switch("leaf2"));
        REQUIRE(r.ok());
        CHECK((*r)->name == "roce");
    }
}

TEST_CASE("fabric indexes each node's ports, switch by switch, and the fleet's cables by node") {
    auto fleet = small_fleet();
    auto leaf2 = cabled_ports(3, "r1", 2);  // r1's nodes on leaf2 too
    auto fabric = build_fabric(fleet, {SwitchPorts{"leaf1", cabled_ports(4, "r1", 2)}, SwitchPorts{"leaf2", leaf2}});
    REQUIRE(fabric.ok());
    const auto& refs = fabric->ports_of("r1n2");
    REQUIRE(refs.size() == 2);
    CHECK(fabric->switches[refs[0].sw].name == "leaf1");
    CHECK(fabric->switches[refs[0].sw].ports[refs[0].port].name == "Ethernet4");
    CHECK(fabric->switches[refs[1].sw].name == "leaf2");
    CHECK(fabric->ports_of("r2n1").empty());
    REQUIRE(fabric->find_node("r2n1") != nullptr);
    CHECK(fabric->find_node("r2n1")->rack == "r2");
    CHECK(fabric->find_node("nobody") == nullptr);

    // Cables: indexed once asked, and a change of size falls back to the walk.
    fleet.cabling.push_back({"r1n1", "mlx5_0", "leaf1", "Ethernet0", {}});
    fleet.cabling.push_back({"r1n2", "mlx5_0", "leaf1", "Ethernet4", {}});
    fleet.index_cables();
    REQUIRE(fleet.cables_of("r1n2").size() == 1);
    CHECK(fleet.cables_of("r1n2")[0]->port == "Ethernet4");
    CHECK(fleet.cables_of("r2n1").empty());
    fleet.cabling.push_back({"r1n2", "mlx5_1", "leaf2", "Ethernet4", {}});
    CHECK(fleet.cables_of("r1n2").size() == 2);
}

namespace {

using kiln::network::SwitchLink;

// small_fleet with a spine: Ethernet12 of each leaf is cabled to spine1's
// Ethernet0 (leaf1) and Ethernet4 (leaf2); the leaves' first two ports to nodes.
struct SpineFabric {
    kiln::config::Fleet fleet = small_fleet();
    std::vector<SwitchPorts> ports;

    SpineFabric() {
        kiln::config::Switch spine;
        spine.name = "spine1";
        spine.os = "sonic";
        fleet.switches.push_back(spine);
        auto leaf1 = cabled_ports(4, "r1", 2);
        auto leaf2 = cabled_ports(4, "r2", 2);
        auto sp = make_ports(2);
        leaf1[3].uplink = SwitchLink{"spine1", "Ethernet0"};
        sp[0].uplink = SwitchLink{"leaf1", "Ethernet12"};
        leaf2[3].uplink = SwitchLink{"spine1", "Ethernet4"};
        leaf2[3].cable_length_m = 100;
        sp[1].uplink = SwitchLink{"leaf2", "Ethernet12"};
        sp[1].cable_length_m = 100;
        ports = {SwitchPorts{"leaf1", leaf1}, SwitchPorts{"leaf2", leaf2}, SwitchPorts{"spine1", sp}};
    }
};

}  // namespace

TEST_CASE("fabric holds uplinks at both ends, 40 m unless given, and indexes them by switch") {
    SpineFabric s;
    auto fabric = build_fabric(s.fleet, s.ports);
    REQUIRE(fabric.ok());
    const auto* leaf1 = fabric->find_switch("leaf1");
    const auto* spine = fabric->find_switch("spine1");
    REQUIRE(leaf1 != nullptr);
    REQUIRE(spine != nullptr);
    const auto* up = leaf1->find_port("Ethernet12");
    REQUIRE(up->uplink);
    CHECK(up->cabled());
    CHECK_FALSE(leaf1->find_port("Ethernet8")->cabled());
    CHECK(kiln::network::cable_length_of(*up) == 40);
    CHECK(kiln::network::cable_length_of(*leaf1->find_port("Ethernet0")) == 5);  // a host link
    CHECK(kiln::network::cable_length_of(*spine->find_port("Ethernet4")) == 100);
    size_t far_sw = 99;
    const auto* far = fabric->facing(*up, &far_sw);
    REQUIRE(far != nullptr);
    CHECK(far->name == "Ethernet0");
    CHECK(fabric->switches[far_sw].name == "spine1");
    CHECK(fabric->facing(*leaf1->find_port("Ethernet0")) == nullptr);  // cabled to a node
    const size_t spine_at = static_cast<size_t>(spine - fabric->switches.data());
    REQUIRE(fabric->uplinks_of(spine_at).size() == 2);
    CHECK(fabric->uplinks_of(0).size() == 1);
    CHECK(fabric->ports_of("r1n1").size() == 1);  // uplinks are no node's own ports
}

TEST_CASE("fabric refuses uplinks that do not join two switches both ways") {
    SpineFabric s;
    SECTION("far end does not face back") {
        s.ports[2].ports[0].uplink.reset();
        auto f = build_fabric(s.fleet, s.ports);
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.bad_uplink");
        CHECK_THAT(f.error().message, Catch::Contains("leaf1: port Ethernet12: uplink to spine1 Ethernet0"));
    }
    SECTION("far port missing") {
        s.ports[0].ports[3].uplink->port = "Ethernet96";
        auto f = build_fabric(s.fleet, s.ports);
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.bad_uplink");
        CHECK_THAT(f.error().message, Catch::Contains("has no such port"));
    }
    SECTION("far switch unknown") {
        s.ports[0].ports[3].uplink->switch_name = "spine9";
        auto f = build_fabric(s.fleet, s.ports);
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.unknown_switch");
    }
    SECTION("a port cabled to a node and a switch") {
        s.ports[0].ports[0].uplink = SwitchLink{"spine1", "Ethernet0"};
        auto f = build_fabric(s.fleet, s.ports);
        REQUIRE_FALSE(f.ok());
        CHECK(f.error().code == "network.bad_port");
    }
}

TEST_CASE("fabric gives a spine the profile of the leaves its uplinks reach") {
    SpineFabric s;
    kiln::network::RoceProfile other = roce_profile();
    other.name = "other";
    other.lossless_priority = 4;
    kiln::network::add_network_profile(s.fleet, other);
    for (auto& n : s.fleet.nodes) n.set_profile("network", "other");
    auto fabric = build_fabric(s.fleet, s.ports);
    REQUIRE(fabric.ok());
    // Two profiles in the fleet: without its uplinks the spine would have none.
    auto p = profile_for_switch(s.fleet, *fabric, *fabric->find_switch("spine1"));
    REQUIRE(p.ok());
    CHECK((*p)->name == "other");
    // The fleet-only overload follows the fleet's cabling to the same answer.
    s.fleet.cabling.push_back({"r1n1", "mlx5_0", "leaf1", "Ethernet0", 0, {}});
    auto q = profile_for_switch(s.fleet, *fabric->find_switch("spine1"));
    REQUIRE(q.ok());
    CHECK((*q)->name == "other");

    SECTION("leaves that carry different profiles are an error naming both") {
        for (auto& n : s.fleet.nodes)
            if (n.rack == "r2") n.set_profile("network", "roce");
        auto f2 = build_fabric(s.fleet, s.ports);
        REQUIRE(f2.ok());
        auto r = profile_for_switch(s.fleet, *f2, *f2->find_switch("spine1"));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "network.profile_conflict");
        CHECK_THAT(r.error().message, Catch::Contains("spine1") && Catch::Contains("leaf1") &&
                                          Catch::Contains("leaf2") && Catch::Contains("other") &&
                                          Catch::Contains("roce"));
    }
}

TEST_CASE("fabric scope of a node: its ports, its leaf's uplinks, and on the spine only the port facing its leaf") {
    SpineFabric s;
    auto fabric = build_fabric(s.fleet, s.ports);
    REQUIRE(fabric.ok());
    auto names = [](const kiln::network::SwitchScope& sc) {
        std::vector<std::string> out;
        for (const auto& p : sc.ports) out.push_back(p.name);
        return out;
    };
    auto r1 = kiln::network::scopes_for_node(s.fleet, *fabric, *s.fleet.find_node("r1n2"));
    REQUIRE(r1.ok());
    REQUIRE(r1->size() == 2);
    CHECK((*r1)[0].sw->name == "leaf1");
    CHECK(names((*r1)[0]) == std::vector<std::string>{"Ethernet4", "Ethernet12"});
    CHECK((*r1)[1].sw->name == "spine1");
    CHECK(names((*r1)[1]) == std::vector<std::string>{"Ethernet0"});
    REQUIRE((*r1)[1].profile != nullptr);
    CHECK((*r1)[1].profile->name == "roce");
    CHECK(kiln::network::cable_length_of((*r1)[1].ports[0]) == 40);

    auto r2 = kiln::network::scopes_for_node(s.fleet, *fabric, *s.fleet.find_node("r2n1"));
    REQUIRE(r2.ok());
    REQUIRE(r2->size() == 2);
    CHECK(names((*r2)[0]) == std::vector<std::string>{"Ethernet0", "Ethernet12"});
    CHECK(names((*r2)[1]) == std::vector<std::string>{"Ethernet4"});
    CHECK(kiln::network::cable_length_of((*r2)[1].ports[0]) == 100);

    // The whole spine, as `kiln network drift` checks it: both uplink ports.
    auto whole = kiln::network::scope_for_switch(s.fleet, *fabric, *s.fleet.find_switch("spine1"));
    REQUIRE(whole.ok());
    CHECK(names(*whole) == std::vector<std::string>{"Ethernet0", "Ethernet4"});

    // Leaves with different profiles: the spine's nodes cannot both hold.
    kiln::network::RoceProfile other = roce_profile();
    other.name = "other";
    kiln::network::add_network_profile(s.fleet, other);
    for (auto& n : s.fleet.nodes)
        if (n.rack == "r2") n.set_profile("network", "other");
    auto mixed = kiln::network::scopes_for_node(s.fleet, *fabric, *s.fleet.find_node("r1n1"));
    REQUIRE_FALSE(mixed.ok());
    CHECK(mixed.error().code == "network.profile_conflict");
}

namespace {

// SpineFabric under a super-spine: spine1's Ethernet8 to super1's Ethernet0,
// and a second spine without leaves, spine2's Ethernet0 to super1's
// Ethernet4. Both core links have no node at either end.
struct SuperSpineFabric : SpineFabric {
    SuperSpineFabric() {
        for (const char* name : {"spine2", "super1"}) {
            kiln::config::Switch sw;
            sw.name = name;
            sw.os = "sonic";
            fleet.switches.push_back(sw);
        }
        ports[2].ports.push_back(make_ports(3)[2]);
        ports[2].ports[2].uplink = SwitchLink{"super1", "Ethernet0"};
        auto spine2 = make_ports(1);
        spine2[0].uplink = SwitchLink{"super1", "Ethernet4"};
        auto super1 = make_ports(2);
        super1[0].uplink = SwitchLink{"spine1", "Ethernet8"};
        super1[1].uplink = SwitchLink{"spine2", "Ethernet0"};
        super1[1].cable_length_m = 150;
        spine2[0].cable_length_m = 150;
        ports.push_back(SwitchPorts{"spine2", spine2});
        ports.push_back(SwitchPorts{"super1", super1});
    }
};

std::vector<std::string> port_names(const kiln::network::SwitchScope& sc) {
    std::vector<std::string> out;
    for (const auto& p : sc.ports) out.push_back(p.name);
    return out;
}

}  // namespace

TEST_CASE("fabric marks core links (no node at either end) and sizes them for 300 m unless given") {
    SuperSpineFabric s;
    auto fabric = build_fabric(s.fleet, s.ports);
    REQUIRE(fabric.ok());
    CHECK(fabric->find_switch("leaf1")->leaf);
    CHECK_FALSE(fabric->find_switch("spine1")->leaf);
    const auto* leaf_up = fabric->find_switch("leaf1")->find_port("Ethernet12");
    const auto* spine_down = fabric->find_switch("spine1")->find_port("Ethernet0");
    const auto* spine_up = fabric->find_switch("spine1")->find_port("Ethernet8");
    const auto* super_down = fabric->find_switch("super1")->find_port("Ethernet0");
    CHECK_FALSE(leaf_up->uplink->core);
    CHECK_FALSE(spine_down->uplink->core);
    CHECK(spine_up->uplink->core);
    CHECK(super_down->uplink->core);
    CHECK(kiln::network::cable_length_of(*leaf_up) == 40);
    CHECK(kiln::network::cable_length_of(*spine_up) == 300);
    CHECK(kiln::network::cable_length_of(*super_down) == 300);
    CHECK(kiln::network::cable_length_of(*fabric->find_switch("super1")->find_port("Ethernet4")) == 150);
}

TEST_CASE("fabric gives a super-spine, and a spine reached only through it, the profile of the leaves below") {
    SuperSpineFabric s;
    kiln::network::RoceProfile other = roce_profile();
    other.name = "other";
    kiln::network::add_network_profile(s.fleet, other);
    for (auto& n : s.fleet.nodes) n.set_profile("network", "other");
    auto fabric = build_fabric(s.fleet, s.ports);
    REQUIRE(fabric.ok());
    // Two profiles in the fleet: neither switch falls back to the only one.
    for (const char* name : {"super1", "spine2"}) {
        INFO(name);
        auto p = profile_for_switch(s.fleet, *fabric, *fabric->find_switch(name));
        REQUIRE(p.ok());
        CHECK((*p)->name == "other");
    }
    // The fleet-only overload walks the fleet's cabling and uplinks the same way.
    s.fleet.cabling.push_back({"r1n1", "mlx5_0", "leaf1", "Ethernet0", 0, {}});
    s.fleet.uplinks.push_back({"leaf1", "Ethernet12", "spine1", "Ethernet0", 0, {}});
    s.fleet.uplinks.push_back({"spine1", "Ethernet8", "super1", "Ethernet0", 0, {}});
    auto q = profile_for_switch(s.fleet, *fabric->find_switch("super1"));
    REQUIRE(q.ok());
    CHECK((*q)->name == "other");

    SECTION("leaves two tiers down that carry different profiles are an error naming both") {
        for (auto& n : s.fleet.nodes)
            if (n.rack == "r2") n.set_profile("network", "roce");
        auto f2 = build_fabric(s.fleet, s.ports);
        REQUIRE(f2.ok());
        auto r = profile_for_switch(s.fleet, *f2, *f2->find_switch("spine2"));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "network.profile_conflict");
        CHECK_THAT(r.error().message,
                   Catch::Contains("switch spine2") && Catch::Contains("leaf1") && Catch::Contains("leaf2"));
    }
}

TEST_CASE("fabric scope of a node climbs every core link above its spines, and never down to other leaves") {
    SuperSpineFabric s;
    auto fabric = build_fabric(s.fleet, s.ports);
    REQUIRE(fabric.ok());
    auto r1 = kiln::network::scopes_for_node(s.fleet, *fabric, *s.fleet.find_node("r1n1"));
    REQUIRE(r1.ok());
    std::map<std::string, std::vector<std::string>> by_switch;
    for (const auto& sc : *r1) by_switch[sc.sw->name] = port_names(sc);
    CHECK(by_switch == std::map<std::string, std::vector<std::string>>{
                           {"leaf1", {"Ethernet0", "Ethernet12"}},
                           {"spine1", {"Ethernet0", "Ethernet8"}},  // not Ethernet4: leaf2's
                           {"spine2", {"Ethernet0"}},
                           {"super1", {"Ethernet0", "Ethernet4"}},
                       });
    CHECK(by_switch.count("leaf2") == 0);
    for (const auto& sc : *r1) {
        REQUIRE(sc.profile != nullptr);
        CHECK(sc.profile->name == "roce");
    }
}
