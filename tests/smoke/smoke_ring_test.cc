// The smoke module's ring (smoke_config.h: smoke_ring): the nodes that pick
// one profile in one rack or the whole fleet, in fleet order, indexed or not.
#include <catch2/catch.hpp>

#include "pipelines/smoke/stage/smoke_config.h"

using kiln::config::Fleet;
using kiln::config::Node;

namespace {

// Six nodes picking profile "ring": n0-n2 in rack r1, n3-n5 in r2.
Fleet ring_fleet(const std::string& scope) {
    Fleet f;
    for (int i = 0; i < 6; ++i) {
        Node n;
        n.name = "n" + std::to_string(i);
        n.rack = i < 3 ? "r1" : "r2";
        n.set_profile(kiln::smoke::kSmokeTable, "ring");
        f.nodes.push_back(n);
    }
    kiln::smoke::SmokeProfile p;
    p.name = "ring";
    p.scope = scope;
    kiln::smoke::add_smoke_profile(f, p);
    return f;
}

std::vector<std::string> names(const std::vector<const Node*>& ring) {
    std::vector<std::string> out;
    for (const auto* n : ring) out.push_back(n->name);
    return out;
}

}  // namespace

TEST_CASE("smoke ring: the rack's nodes or the fleet's, in fleet order, before and after index()") {
    for (int pass = 0; pass < 2; ++pass) {
        INFO("indexed: " << pass);
        Fleet rack = ring_fleet("rack");
        Fleet fleet = ring_fleet("fleet");
        Fleet alone = ring_fleet("node");
        if (pass == 1) {
            rack.index();
            fleet.index();
            alone.index();
        }
        CHECK(names(kiln::smoke::smoke_ring(rack, rack.nodes[4])) == std::vector<std::string>{"n3", "n4", "n5"});
        CHECK(names(kiln::smoke::smoke_ring(fleet, fleet.nodes[1])) ==
              std::vector<std::string>{"n0", "n1", "n2", "n3", "n4", "n5"});
        CHECK(names(kiln::smoke::smoke_ring(alone, alone.nodes[1])) == std::vector<std::string>{"n1"});
        // A node of another profile rings with its own profile's nodes only.
        Node& odd = fleet.nodes[2];
        odd.set_profile(kiln::smoke::kSmokeTable, "other");
        CHECK(names(kiln::smoke::smoke_ring(fleet, fleet.nodes[0])) ==
              std::vector<std::string>{"n0", "n1", "n3", "n4", "n5"});
        // A node that picks no profile rings alone.
        Node none;
        none.name = "x";
        CHECK(names(kiln::smoke::smoke_ring(fleet, none)) == std::vector<std::string>{"x"});
    }
}

TEST_CASE("smoke ring: nodes whose pipeline has no smoke stage are left out, but never the node itself") {
    Fleet f = ring_fleet("rack");
    f.pipelines["quiet"] = {"quiet", "", {"firmware"}, ""};
    f.nodes[1].role = "quiet";
    f.index();
    CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[0])) == std::vector<std::string>{"n0", "n2"});
    CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[1])) == std::vector<std::string>{"n0", "n1", "n2"});
    // The pipelines are read at each call, not when indexed.
    f.pipelines["quiet"].stages.push_back("smoke");
    CHECK(names(kiln::smoke::smoke_ring(f, f.nodes[0])) == std::vector<std::string>{"n0", "n1", "n2"});
    // A copy of a node stands in its own place.
    const Node copy = f.nodes[1];
    CHECK(names(kiln::smoke::smoke_ring(f, copy)) == std::vector<std::string>{"n0", "n1", "n2"});
}

TEST_CASE("smoke ring: the fleet check counts each ring once, of the nodes that run the stage") {
    // A fleet ring whose first node runs no smoke: five nodes wait in one
    // ring, so the run needs parallel >= 1 + 4 (the rest's waits, then one).
    Fleet f = ring_fleet("fleet");
    f.pipelines["quiet"] = {"quiet", "", {"firmware"}, ""};
    f.nodes[0].role = "quiet";
    f.index();
    const auto table = kiln::smoke::smoke_table();
    REQUIRE(table.check_fleet);
    auto check = [&](int parallel) {
        f.limits.parallel = parallel;
        std::vector<kiln::config::Diagnostic> errors;
        table.check_fleet(f, errors);
        return errors;
    };
    CHECK(check(5).empty());
    auto short_one = check(4);
    REQUIRE(short_one.size() == 1);
    CHECK(short_one[0].key == "smoke.ring.scope");
    CHECK_THAT(short_one[0].message, Catch::StartsWith("1 shared smoke ring (5 nodes) need [limits] parallel >= 5"));
    // Every node in it: one ring of six.
    f.nodes[0].role = "";
    auto all = check(5);
    REQUIRE(all.size() == 1);
    CHECK_THAT(all[0].message, Catch::StartsWith("1 shared smoke ring (6 nodes) need [limits] parallel >= 6"));
}
