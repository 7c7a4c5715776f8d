// The smoke stage through the engine, with kiln-smoke ranks as local
// processes (two "VMs" per node on loopback) and the handover stage after
// it: a failing check quarantines the node and the hook hears which; a pass
// hands the node over and a second run does nothing.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/smoke_result_store.h"
#include "pipelines/smoke/smoke_stage.h"
#include "provisioner/engine/engine.h"
#include "provisioner/handover/handover_stage.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/smoke/smoke_harness.h"

using nlohmann::json;

using kiln::test::SmokeHarness;

TEST_CASE("a failing smoke check quarantines the node and the hook receives the failing checks") {
    SmokeHarness h({{"cpu_gemm_gflops", 1e15}, {"allreduce_busbw_gbps", 0.0}});
    auto report = h.run();
    REQUIRE(report.nodes.size() == 1);
    const auto& n = report.nodes[0];
    CHECK(n.state == "quarantined");
    CHECK(n.stage == "smoke");
    CHECK(n.error.find("cpu_gemm_gflops") != std::string::npos);
    CHECK(n.error.find("allreduce_busbw_gbps") == std::string::npos);

    auto docs = h.hook_documents();
    REQUIRE(docs.size() == 1);
    CHECK(docs[0]["state"] == "quarantined");
    CHECK(docs[0]["node"] == "n001");
    REQUIRE(docs[0]["failed_checks"].size() == 2);  // one per VM
    for (const auto& f : docs[0]["failed_checks"]) {
        CHECK(f["name"] == "cpu_gemm_gflops");
        CHECK(f["threshold"].get<double>() == 1e15);
    }
    // The journal keeps the whole result as the stage's event.
    auto hist = h.store->history("n001", 0);
    REQUIRE(hist.ok());
    bool journaled = false;
    for (const auto& e : *hist)
        if (e.kind == "event" && e.name == "smoke.result") {
            auto j = json::parse(e.text);
            journaled = j["verdict"] == "fail" && j["vms"].size() == 2;
        }
    CHECK(journaled);
    auto states = h.store->node_states();
    REQUIRE(states.ok());
    CHECK((*states)[0].state == "quarantined");
}

TEST_CASE("passing smoke checks hand the node over and a second run changes nothing") {
    SmokeHarness h({{"allreduce_busbw_gbps", 0.0}, {"allreduce_errors", 0}, {"loss_drop_fraction", 0.2}});
    auto first = h.run();
    REQUIRE(first.nodes.size() == 1);
    INFO(first.nodes[0].error);
    CHECK(first.nodes[0].state == "ready");
    auto docs = h.hook_documents();
    REQUIRE(docs.size() == 1);
    CHECK(docs[0]["state"] == "ready");
    CHECK(docs[0]["failed_checks"].empty());
    CHECK(docs[0]["smoke"]["verdict"] == "pass");
    // Both VMs ran the all-reduce with each other.
    int reduced = 0;
    for (const auto& c : docs[0]["smoke"]["checks"])
        if (c["name"] == "allreduce_errors" && c["verdict"] == "pass") ++reduced;
    CHECK(reduced == 2);

    auto second = h.run();
    CHECK(second.stages_run == 0);
    CHECK(second.stages_skipped == 2);
    CHECK(second.nodes[0].state == "ready");
    CHECK(h.hook_documents().size() == 1);  // the hook did not run again
}

TEST_CASE("judging: the fleet threshold wins and a threshold nobody reported fails") {
    json result = {{"vms", json::array({{{"vm", "kiln-a-vm0"},
                                         {"report",
                                          {{"checks", json::array({{{"name", "x"},
                                                                    {"figure", 5.0},
                                                                    {"threshold", 1.0},
                                                                    {"compare", ">="},
                                                                    {"verdict", "pass"}}})}}}}})}};
    kiln::smoke::judge_result(result, {{"x", 4.0}});
    CHECK(result["verdict"] == "pass");
    kiln::smoke::judge_result(result, {{"x", 6.0}});
    CHECK(result["verdict"] == "fail");
    kiln::smoke::judge_result(result, {{"x", 4.0}, {"missing_check", 1.0}});
    CHECK(result["verdict"] == "fail");
    REQUIRE(result["failed"].size() == 1);
    CHECK(result["failed"][0]["name"] == "missing_check");
    CHECK(kiln::smoke::describe_failures(result).find("no VM reported") != std::string::npos);
}
