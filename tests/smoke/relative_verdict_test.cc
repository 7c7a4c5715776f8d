// Fleet-relative verdicts with injected figures: the median and MAD, and the
// smoke stage's judging of a ring where one VM sits at 70% of the median.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/relative_verdict.h"
#include "pipelines/smoke/smoke_record.h"
#include "pipelines/smoke/stage/smoke_stage.h"

using nlohmann::json;
using namespace kiln::smoke;

TEST_CASE("median and MAD ignore one outlier that a mean would follow") {
    auto s = spread_of({10, 10, 10, 10, 10, 7});
    CHECK(s.n == 6);
    CHECK(s.median == 10);
    CHECK(s.mad == 0);
    auto even = spread_of({1, 2, 3, 4});
    CHECK(even.median == 2.5);
    CHECK(even.mad == 1.0);
    auto odd = spread_of({5, 1, 3});
    CHECK(odd.median == 3);
    CHECK(odd.mad == 2);

    auto r = compare_with_median({{"a", 10}, {"b", 11}, {"c", 9}, {"d", 7}}, 0.9);
    REQUIRE(r);
    CHECK(r->spread.median == 9.5);
    REQUIRE(r->standings.size() == 4);
    CHECK(r->standings[3].below);
    CHECK_FALSE(r->standings[0].below);
    REQUIRE(r->standings[3].robust_z);
    CHECK(*r->standings[3].robust_z < -1);
    // Two figures say nothing about a typical member; a zero median neither.
    CHECK_FALSE(compare_with_median({{"a", 10}, {"b", 5}}, 0.9));
    CHECK_FALSE(compare_with_median({{"a", 0}, {"b", 0}, {"c", 0}}, 0.9));
}

namespace {

// One VM entry of a ring: a bandwidth figure that passes its absolute floor
// and a ceiling-type error count (never compared with a median).
json vm_entry(const std::string& node, const std::string& vm, double busbw) {
    return {{"node", node},
            {"vm", vm},
            {"report",
             {{"checks", json::array({{{"name", "allreduce_busbw_gbps"},
                                       {"figure", busbw},
                                       {"threshold", 0.001},
                                       {"compare", ">="},
                                       {"verdict", "pass"}},
                                      {{"name", "allreduce_errors"},
                                       {"figure", 0},
                                       {"threshold", 0},
                                       {"compare", "<="},
                                       {"verdict", "pass"}}})}}}};
}

// Six nodes of one VM each; node "n<slow>" at `fraction` of the others.
json ring_of_six(int slow, double fraction) {
    json ring = json::array();
    for (int i = 0; i < 6; ++i)
        ring.push_back(
            vm_entry("n" + std::to_string(i), "kiln-n" + std::to_string(i) + "-vm0", i == slow ? 2.0 * fraction : 2.0));
    return ring;
}

json node_result(const json& ring, int i) {
    json own = ring[i];
    return {{"node", own["node"]}, {"vms", json::array({own})}};
}

}  // namespace

TEST_CASE("relative verdicts: one VM at 70% of the ring's median fails or warns as configured") {
    const json ring = ring_of_six(4, 0.7);
    SECTION("fail") {
        for (int i = 0; i < 6; ++i) {
            INFO("node n" << i);
            json r = node_result(ring, i);
            judge_result(r, {}, RelativePolicy{0.9, true}, ring);
            CHECK(r["verdict"] == (i == 4 ? "fail" : "pass"));
            // Every node's result shows the whole distribution and where each VM sits.
            const json& c = r["relative"]["checks"]["allreduce_busbw_gbps"];
            CHECK(c["n"] == 6);
            CHECK(c["median"] == 2.0);
            REQUIRE(c["members"].size() == 6);
            CHECK(c["members"][4]["member"] == "n4/kiln-n4-vm0");
            CHECK(c["members"][4]["fraction"].get<double>() == Approx(0.7));
            CHECK(c["members"][4]["below"] == true);
            CHECK_FALSE(r["relative"]["checks"].contains("allreduce_errors"));  // a ceiling: no median
        }
        json bad = node_result(ring, 4);
        judge_result(bad, {}, RelativePolicy{0.9, true}, ring);
        REQUIRE(bad["failed"].size() == 1);
        CHECK(bad["failed"][0]["vm"] == "kiln-n4-vm0");
        CHECK(describe_failures(bad).find("0.70 of the ring's median") != std::string::npos);
    }
    SECTION("warn") {
        json bad = node_result(ring, 4);
        judge_result(bad, {}, RelativePolicy{0.9, false}, ring);
        CHECK(bad["verdict"] == "pass");
        REQUIRE(bad["warnings"].size() == 1);
        CHECK(bad["warnings"][0]["name"] == "allreduce_busbw_gbps");
        CHECK(bad["warnings"][0]["detail"].get<std::string>().find("0.70 of the median 2") != std::string::npos);
    }
    SECTION("a floor below the outlier's fraction lets it pass") {
        json bad = node_result(ring, 4);
        judge_result(bad, {}, RelativePolicy{0.6, true}, ring);
        CHECK(bad["verdict"] == "pass");
    }
    SECTION("no relative floor: no relative verdict at all") {
        json bad = node_result(ring, 4);
        judge_result(bad, {}, RelativePolicy{}, ring);
        CHECK(bad["verdict"] == "pass");
        CHECK_FALSE(bad.contains("relative"));
    }
}

TEST_CASE("relative verdicts: a uniform ring passes, and a node's own VMs are its ring by default") {
    const json ring = ring_of_six(-1, 1.0);
    for (int i = 0; i < 6; ++i) {
        json r = node_result(ring, i);
        judge_result(r, {}, RelativePolicy{0.9, true}, ring);
        CHECK(r["verdict"] == "pass");
        CHECK(r["warnings"].empty());
    }
    // One node of four VMs, node scope: its VMs are the population.
    json node = {{"node", "a"}, {"vms", json::array()}};
    for (int v = 0; v < 4; ++v)
        node["vms"].push_back(vm_entry("a", "kiln-a-vm" + std::to_string(v), v == 2 ? 1.4 : 2.0));
    judge_result(node, {}, RelativePolicy{0.9, true});
    CHECK(node["verdict"] == "fail");
    REQUIRE(node["failed"].size() == 1);
    CHECK(node["failed"][0]["vm"] == "kiln-a-vm2");
}
