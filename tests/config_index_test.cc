// The fleet's lookup indexes (Fleet::index): the same answers as a scan,
// in file order, and never hiding an element edited after indexing.
#include <catch2/catch.hpp>

#include "provisioner/config/fleet_config.h"

using kiln::config::Cable;
using kiln::config::Fleet;
using kiln::config::Node;
using kiln::config::Switch;
using kiln::config::SwitchPort;
using kiln::config::Uplink;

namespace {

Fleet small_fleet() {
    Fleet f;
    for (const char* r : {"r1", "r2"}) f.racks.push_back({r, {}, {}});
    for (const char* s : {"leaf-1", "leaf-2", "spine-1", "spine-2"}) {
        Switch sw;
        sw.name = s;
        for (const char* p : {"p1", "p2", "p3"}) {
            SwitchPort port;
            port.name = p;
            sw.ports.push_back(port);
        }
        f.switches.push_back(sw);
    }
    for (int i = 0; i < 6; ++i) {
        Node n;
        n.name = "n" + std::to_string(i);
        n.rack = i < 3 ? "r1" : "r2";
        n.set_profile("smoke", "ring");
        f.nodes.push_back(n);
        f.cabling.push_back(Cable{n.name, "mlx5_0", i < 3 ? "leaf-1" : "leaf-2", "p1", 0, {}});
    }
    // File order: leaf-2's uplink first, so order is the fleet's, not the leaf's.
    f.uplinks.push_back(Uplink{"leaf-2", "p3", "spine-1", "p2", 0, {}});
    f.uplinks.push_back(Uplink{"leaf-1", "p3", "spine-1", "p1", 0, {}});
    f.uplinks.push_back(Uplink{"spine-2", "p1", "leaf-1", "p2", 0, {}});
    return f;
}

std::vector<std::string> ends(const std::vector<const Uplink*>& ups) {
    std::vector<std::string> out;
    for (const auto* u : ups) out.push_back(u->switch_name + ":" + u->port);
    return out;
}

std::vector<std::string> names(const std::vector<const Node*>& ring) {
    std::vector<std::string> out;
    for (const auto* n : ring) out.push_back(n->name);
    return out;
}

}  // namespace

TEST_CASE("fleet index: lookups answer as a scan does, before and after index()") {
    Fleet f = small_fleet();
    f.grouped_picks.insert("smoke");
    for (int pass = 0; pass < 2; ++pass) {
        INFO("indexed: " << pass);
        if (pass == 1) f.index();
        REQUIRE(f.find_node("n4") == &f.nodes[4]);
        CHECK(f.find_node("n9") == nullptr);
        CHECK(f.find_rack("r2") == &f.racks[1]);
        REQUIRE(f.find_switch("spine-1") == &f.switches[2]);
        CHECK(f.find_switch("spine-1")->find_port("p3") == &f.switches[2].ports[2]);
        CHECK(f.find_switch("spine-1")->find_port("p9") == nullptr);
        // Both ends count, in file order.
        CHECK(ends(f.uplinks_of("leaf-1")) == std::vector<std::string>{"leaf-1:p3", "spine-2:p1"});
        CHECK(ends(f.uplinks_of("spine-1")) == std::vector<std::string>{"leaf-2:p3", "leaf-1:p3"});
        CHECK(f.uplinks_of("leaf-9").empty());
        CHECK(f.cables_of("n4").size() == 1);
        // Nodes by their pick, in fleet order: the rack's, or the fleet's.
        const std::string r2 = "r2", r9 = "r9";
        CHECK(names(f.nodes_picking("smoke", "ring", &r2)) == std::vector<std::string>{"n3", "n4", "n5"});
        CHECK(names(f.nodes_picking("smoke", "ring")).size() == 6);
        CHECK(f.nodes_picking("smoke", "ring", &r9).empty());
        CHECK(f.nodes_picking("smoke", "other").empty());
        CHECK(f.nodes_picking("vm", "ring").empty());
    }
}

TEST_CASE("fleet index: a pick changed after index() is not answered from the index") {
    Fleet f = small_fleet();
    f.grouped_picks.insert("smoke");
    f.index();
    f.nodes[4].set_profile("smoke", "other");
    const std::string r2 = "r2";
    CHECK(names(f.nodes_picking("smoke", "ring", &r2)) == std::vector<std::string>{"n3", "n5"});
    CHECK(names(f.nodes_picking("smoke", "ring")).size() == 5);
}

TEST_CASE("fleet index: an element renamed or added after index() is still found") {
    Fleet f = small_fleet();
    f.index();
    f.nodes[2].name = "renamed";
    CHECK(f.find_node("renamed") == &f.nodes[2]);
    CHECK(f.find_node("n2") == nullptr);
    f.switches[0].ports.push_back(SwitchPort{});
    f.switches[0].ports.back().name = "p4";
    CHECK(f.switches[0].find_port("p4") == &f.switches[0].ports.back());
    f.uplinks.push_back(Uplink{"leaf-2", "p2", "spine-2", "p2", 0, {}});
    CHECK(ends(f.uplinks_of("spine-2")) == std::vector<std::string>{"spine-2:p1", "leaf-2:p2"});
}
