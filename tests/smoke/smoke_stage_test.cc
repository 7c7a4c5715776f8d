// The smoke stage through the engine, with kiln-smoke ranks as local
// processes (two "VMs" per node on loopback) and the handover stage after
// it: a failing check quarantines the node and the hook hears which; a pass
// hands the node over and a second run does nothing.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/smoke_record.h"
#include "pipelines/smoke/stage/smoke_stage.h"
#include "provisioner/engine/engine.h"
#include "provisioner/handover/stage/handover_stage.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/smoke/smoke_harness.h"
#include "tests/support/fleet_builder.h"

using nlohmann::json;

using kiln::test::SmokeHarness;

TEST_CASE("a failing smoke check quarantines the node and the hook receives the failing checks") {
    SmokeHarness h({{"cpu_gemm_gflops", 1e15}, {"allreduce_busbw_gbps", 0.0}});
    auto report = h.run();
    REQUIRE(report.nodes.size() == 1);
    const auto& n = report.nodes[0];
    CHECK(n.state == kiln::engine::NodeState::Quarantined);
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
    // The journal keeps the whole result as the stage's record, typed on
    // reading, and says the verdict in the stage's event.
    auto rec = h.store->latest_record("n001", kiln::smoke::kResultKind);
    REQUIRE(rec.ok());
    REQUIRE(rec->has_value());
    CHECK((*rec)->stage == "smoke");
    auto typed = kiln::smoke::read_smoke_record(**rec);
    REQUIRE(typed.ok());
    CHECK(typed->verdict == "fail");
    CHECK(typed->vms.size() == 2);
    REQUIRE(typed->failed.size() == 2);
    CHECK(typed->failed[0].name == "cpu_gemm_gflops");
    CHECK(typed->failed[0].threshold == 1e15);
    auto hist = h.store->history("n001", 0);
    REQUIRE(hist.ok());
    bool said = false;
    for (const auto& e : *hist)
        if (e.kind == "event" && e.name == "smoke.result")
            said = e.text.rfind("fail: ", 0) == 0 && e.text.find("cpu_gemm_gflops") != std::string::npos;
    CHECK(said);
    auto states = h.store->node_states();
    REQUIRE(states.ok());
    CHECK((*states)[0].state == "quarantined");
}

TEST_CASE("passing smoke checks hand the node over and a second run changes nothing") {
    SmokeHarness h({{"allreduce_busbw_gbps", 0.0}, {"allreduce_errors", 0}, {"loss_drop_fraction", 0.2}});
    auto first = h.run();
    REQUIRE(first.nodes.size() == 1);
    INFO(first.nodes[0].error);
    CHECK(first.nodes[0].state == kiln::engine::NodeState::Ready);
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
    CHECK(second.nodes[0].state == kiln::engine::NodeState::Ready);
    CHECK(h.hook_documents().size() == 1);  // the hook did not run again
}

namespace {

// As a kiln before the records table left a converged node: no records in
// the journal; the smoke result and the handover verdict in files beside
// it, in the shapes that kiln wrote.
void as_older_kiln_left_it(SmokeHarness& h, const std::string& node) {
    auto smoke = h.store->latest_record(node, kiln::smoke::kResultKind);
    auto hand = h.store->latest_record(node, "handover");
    REQUIRE(smoke.ok());
    REQUIRE(smoke->has_value());
    REQUIRE(hand.ok());
    REQUIRE(hand->has_value());
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(h.dir.file("journal.db").c_str(), &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    const int rc = sqlite3_exec(db, "DELETE FROM records", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    REQUIRE(rc == SQLITE_OK);
    REQUIRE_FALSE(h.store->latest_record(node, kiln::smoke::kResultKind)->has_value());
    const json verdict = json::parse((*hand)->body);
    h.dir.write(".kiln/smoke/" + node + ".json", (*smoke)->body);
    h.dir.write(".kiln/handover/" + node + ".json", json{{"state", "ready"},
                                                         {"input_hash", verdict["input_hash"]},
                                                         {"hook", verdict["hook"]},
                                                         {"ts_ms", verdict["ts_ms"]},
                                                         {"smoke", "pass"}}
                                                        .dump(2));
}

}  // namespace

TEST_CASE("a node an older kiln left converged, its results in files beside the journal, stays converged") {
    SmokeHarness h({{"allreduce_errors", 0}});
    auto first = h.run();
    REQUIRE(first.nodes[0].state == kiln::engine::NodeState::Ready);
    const int smoke_runs = h.transport->runs_by_node["n001"];
    REQUIRE(smoke_runs >= 1);
    as_older_kiln_left_it(h, "n001");
    auto second = h.run();
    CHECK(second.stages_run == 0);
    CHECK(second.stages_skipped == 2);
    CHECK(second.nodes[0].state == kiln::engine::NodeState::Ready);
    CHECK(h.transport->runs_by_node["n001"] == smoke_runs);
    CHECK(h.hook_documents().size() == 1);

    // Without the files (and still no records) there is nothing to show
    // the smoke ran: it runs again, and publishes its record.
    REQUIRE(std::filesystem::remove_all(h.dir.file(".kiln")) == 5);  // .kiln, the two folders and files
    auto third = h.run();
    CHECK(third.stages_run == 2);
    CHECK(h.transport->runs_by_node["n001"] > smoke_runs);
    CHECK(h.store->latest_record("n001", kiln::smoke::kResultKind)->has_value());
}

TEST_CASE("a smoke record of a schema this kiln does not know fails the node, naming it") {
    SmokeHarness h({{"allreduce_errors", 0}});
    auto run = h.store->begin_run({"apply", "f", "", "test"});
    REQUIRE(run.ok());
    REQUIRE(h.store->put_record({*run, "n001", "smoke", kiln::smoke::kResultKind, 2, R"({"verdict":"pass"})", 0}));
    REQUIRE(h.store->end_run(*run, "completed"));
    auto report = h.run();
    REQUIRE(report.nodes.size() == 1);
    CHECK(report.nodes[0].state == kiln::engine::NodeState::Failed);
    CHECK(report.nodes[0].error.find("the smoke.result record of n001 in the journal: schema 2, this kiln reads 1") !=
          std::string::npos);
    CHECK(h.transport->runs_by_node["n001"] == 0);  // nothing ran on a record it could not read
}

TEST_CASE("the smoke profile's RDMA write shape reaches every kiln-smoke") {
    SmokeHarness h({{"allreduce_errors", 0}});
    auto& p = *kiln::smoke::mutable_smoke_profile(h.fleet, "quick");
    p.rdma_bytes = 16384;
    p.rdma_iterations = 50;
    p.rdma_pair_timeout = std::chrono::milliseconds(90500);
    auto first = h.run();
    REQUIRE(first.nodes.size() == 1);
    INFO(first.nodes[0].error);
    // kiln-smoke refuses arguments it does not know: it took these.
    CHECK(first.nodes[0].state == kiln::engine::NodeState::Ready);
    REQUIRE(h.transport->args_by_vm.size() == 2);
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    for (const auto& vm_args : h.transport->args_by_vm) {
        const auto& args = vm_args.second;
        INFO(vm_args.first);
        auto value = [&](const std::string& flag) -> std::string {
            auto it = std::find(args.begin(), args.end(), flag);
            CHECK(std::count(args.begin(), args.end(), flag) == 1);
            return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
        };
        CHECK(value("--rdma-bytes") == "16384");
        CHECK(value("--rdma-iterations") == "50");
        CHECK(value("--rdma-timeout") == "90.5");
    }
    // Without them, kiln-smoke keeps its own defaults: no such arguments.
    SmokeHarness plain({{"allreduce_errors", 0}});
    auto second = plain.run();
    REQUIRE(second.nodes.size() == 1);
    for (const auto& [vm, args] : plain.transport->args_by_vm)
        CHECK(std::find(args.begin(), args.end(), "--rdma-bytes") == args.end());
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

TEST_CASE("judging: a check the fleet holds to a threshold fails when it skipped or has no figure") {
    auto one = [](const json& check) {
        return json{{"vms", json::array({{{"vm", "kiln-a-vm0"}, {"report", {{"checks", json::array({check})}}}}})}};
    };
    // One rank: the all-reduce did not run. Without a fleet threshold that
    // is no failure; with one the node fails, and says why.
    json skipped = one({{"name", "allreduce_busbw_gbps"},
                        {"figure", 0.0},
                        {"threshold", 0.001},
                        {"compare", ">="},
                        {"verdict", "skip"},
                        {"detail", "one rank: no peers to reduce with"}});
    kiln::smoke::judge_result(skipped, {});
    CHECK(skipped["verdict"] == "pass");
    kiln::smoke::judge_result(skipped, {{"allreduce_busbw_gbps", 0.0005}});
    CHECK(skipped["verdict"] == "fail");
    REQUIRE(skipped["failed"].size() == 1);
    CHECK(skipped["failed"][0]["figure"].is_null());
    const std::string why = kiln::smoke::describe_failures(skipped);
    CHECK(why.find("did not measure") != std::string::npos);
    CHECK(why.find("one rank") != std::string::npos);

    // A "pass" with no figure (an old or broken guest) is not a measurement.
    json bare = one({{"name", "x"}, {"figure", nullptr}, {"verdict", "pass"}});
    kiln::smoke::judge_result(bare, {});
    CHECK(bare["verdict"] == "pass");
    kiln::smoke::judge_result(bare, {{"x", 1.0}});
    CHECK(bare["verdict"] == "fail");
}

namespace {

// A stage before smoke that fails on the nodes named, and does nothing else.
class GateStage : public kiln::engine::Stage {
public:
    explicit GateStage(std::set<std::string> failing) : failing_(std::move(failing)) {}
    std::string name() const override { return "gate"; }
    kiln::Result<kiln::engine::Observation> observe(kiln::engine::StageContext&) override {
        return kiln::engine::Observation{};
    }
    kiln::Result<std::vector<kiln::engine::Action>> plan(kiln::engine::StageContext&,
                                                         const kiln::engine::Observation&) override {
        return std::vector<kiln::engine::Action>{{"gate:pass", "pass the gate"}};
    }
    kiln::Status apply(kiln::engine::StageContext& ctx, const kiln::engine::Action&) override {
        if (failing_.count(ctx.node().name)) return kiln::make_error("gate", "gate.closed", "the gate is closed");
        return kiln::ok_status();
    }
    kiln::Status verify(kiln::engine::StageContext&) override { return kiln::ok_status(); }

private:
    std::set<std::string> failing_;
};

void share_ring(SmokeHarness& h, const std::string& scope) {
    auto* profiles = kiln::smoke::smoke_profiles(h.fleet);
    REQUIRE(profiles);
    for (const auto& [name, p] : *profiles) kiln::smoke::mutable_smoke_profile(h.fleet, name)->scope = scope;
}

json result_of(const SmokeHarness& h, const std::string& node) {
    auto r = h.store->latest_record(node, kiln::smoke::kResultKind);
    REQUIRE(r.ok());
    REQUIRE(r->has_value());
    return json::parse((*r)->body);
}

}  // namespace

TEST_CASE("a rack-scope smoke ring runs one all-reduce over the VMs of every node in it") {
    SmokeHarness h({{"allreduce_errors", 0}, {"allreduce_busbw_gbps", 0.0}}, 2);
    share_ring(h, "rack");
    auto report = h.run();
    REQUIRE(report.nodes.size() == 2);
    std::set<int64_t> ranks;
    for (const auto& n : report.nodes) {
        INFO(n.node << ": " << n.error);
        CHECK(n.state == kiln::engine::NodeState::Ready);
        auto r = result_of(h, n.node);
        CHECK(r["verdict"] == "pass");
        REQUIRE(r.contains("ring"));
        CHECK(r["ring"]["nodes"] == json::array({"n001", "n002"}));
        CHECK(r["ring"]["ranks"] == 4);
        REQUIRE(r["vms"].size() == 2);  // each node runs its own VMs' ranks
        for (const auto& vm : r["vms"]) {
            CHECK(vm["vm"].get<std::string>().find("kiln-" + n.node + "-vm") == 0);
            CHECK(vm["report"]["ranks"] == 4);
            ranks.insert(vm["rank"].get<int64_t>());
            CHECK(vm["report"]["rank"] == vm["rank"]);
            // The sum of known vectors over all four ranks came out exact.
            bool exact = false;
            for (const auto& c : vm["report"]["checks"])
                if (c["name"] == "allreduce_errors") exact = c["verdict"] == "pass" && c["figure"] == 0;
            CHECK(exact);
        }
    }
    CHECK(ranks == std::set<int64_t>{0, 1, 2, 3});
}

TEST_CASE("a shared smoke ring goes on without the nodes that cannot come") {
    SECTION("a node outside the run's selection") {
        SmokeHarness h({{"allreduce_errors", 0}}, 2);
        share_ring(h, "fleet");
        auto report = h.run({"n001"});
        REQUIRE(report.nodes.size() == 1);
        INFO(report.nodes[0].error);
        CHECK(report.nodes[0].state == kiln::engine::NodeState::Ready);
        auto r = result_of(h, "n001");
        CHECK_FALSE(r.contains("ring"));  // a ring of one node is the node's own
        CHECK(r["vms"][0]["report"]["ranks"] == 2);
    }
    SECTION("a node whose pipeline ended before the smoke stage") {
        SmokeHarness h({{"allreduce_errors", 0}}, 3, {"gate", "smoke", "handover"});
        h.registry.add(std::make_shared<GateStage>(std::set<std::string>{"n002"}));
        share_ring(h, "rack");
        auto report = h.run();
        REQUIRE(report.nodes.size() == 3);
        CHECK(report.nodes[1].state == kiln::engine::NodeState::Failed);
        CHECK(report.nodes[1].stage == "gate");
        for (const std::string node : {"n001", "n003"}) {
            auto r = result_of(h, node);
            INFO(r.dump());
            CHECK(r["verdict"] == "pass");
            CHECK(r["ring"]["nodes"] == json::array({"n001", "n003"}));
            CHECK(r["ring"]["ranks"] == 4);
        }
    }
}

TEST_CASE("members of a shared ring meet parked and wait parked for a slow member's figures") {
    SmokeHarness h({{"allreduce_errors", 0}}, 3);
    share_ring(h, "fleet");
    h.transport->late = {"n002"};
    h.transport->late_by = std::chrono::milliseconds(1500);
    auto report = h.run();
    INFO(h.heard.text);
    REQUIRE(report.nodes.size() == 3);
    for (const auto& n : report.nodes) {
        INFO(n.node << ": " << n.error);
        CHECK(n.state == kiln::engine::NodeState::Ready);
        auto r = result_of(h, n.node);
        CHECK(r["ring"]["nodes"] == json::array({"n001", "n002", "n003"}));
        CHECK(h.transport->runs_by_node[n.node] == 1);  // a resume does not run the ranks again
    }
    // The two quick members waited for n002's figures, parked.
    for (const std::string node : {"n001", "n003"})
        CHECK(h.heard.text.find(node + " smoke waiting: the shared smoke ring's figures") != std::string::npos);
    CHECK(h.heard.text.find("n002 smoke waiting: the shared smoke ring's figures") == std::string::npos);
    // Whoever came first to the meeting waited there for the others, parked.
    CHECK(h.heard.text.find(" smoke waiting: the shared smoke ring to meet") != std::string::npos);
}

// How the test makes a node's ranks bad, as a bad part behind them would.
enum class RankFault {
    corrupt,    // wrong values in the sum: every rank sees a wrong sum
    drop,       // ring links dropped: every rank's all-reduce fails
    slow_link,  // 150 ms before each ring step: every rank's bus bandwidth is under the floor
};

// The bus bandwidth floor of the slow-link case, GB/s. A ring with the slow
// member cannot reach it: a pair's all-reduce of 64 KiB takes at least its 2
// steps x 150 ms, so 0.22 MB/s at most, and longer rings less. A ring
// without it reaches it when one all-reduce (best of 2) takes under 33 ms
// (a pair) to 60 ms (12 ranks); on a loaded 2-core machine such rings
// measured 0.09-0.47 GB/s, 47-235x the floor.
constexpr double kSlowLinkFloorGbps = 0.002;

// Six nodes of two VMs, one ring of twelve ranks, with the VMs of the bad
// nodes made bad by `fault`.
void check_localised(const std::set<std::string>& bad, RankFault fault = RankFault::corrupt) {
    std::map<std::string, double> thresholds{{"allreduce_errors", 0}};
    if (fault == RankFault::slow_link) thresholds["allreduce_busbw_gbps"] = kSlowLinkFloorGbps;
    SmokeHarness h(thresholds, 6);
    share_ring(h, "fleet");
    if (fault == RankFault::corrupt) h.transport->corrupt = bad;
    if (fault == RankFault::drop) h.transport->drop = bad;
    if (fault == RankFault::slow_link) {
        h.transport->slow_link = bad;
        h.transport->slow_link_step = std::chrono::milliseconds(150);
    }
    const std::string failing = fault == RankFault::slow_link ? "allreduce_busbw_gbps" : "allreduce_errors";
    auto report = h.run();
    REQUIRE(report.nodes.size() == 6);
    const json suspects(std::vector<std::string>(bad.begin(), bad.end()));  // fleet order = name order here
    for (const auto& n : report.nodes) {
        INFO(n.node << ": " << n.state << " " << n.error);
        auto r = result_of(h, n.node);
        INFO(r.dump());
        REQUIRE(r.contains("localisation"));
        CHECK(r["localisation"]["suspects"] == suspects);
        CHECK(r["localisation"]["complete"] == true);
        CHECK(r["localisation"]["runs"].size() <= 16);  // 4 ceil(log2 6) + 4
        if (bad.count(n.node)) {
            CHECK(n.state == kiln::engine::NodeState::Quarantined);
            CHECK(r["verdict"] == "fail");
            CHECK(n.error.find("fault_localisation") != std::string::npos);
            CHECK(r["localisation"]["why"][n.node].get<std::string>().find(n.node) != std::string::npos);
        } else {
            CHECK(n.state == kiln::engine::NodeState::Ready);
            CHECK(r["verdict"] == "pass");
            // Its own VMs failed the sum in the whole ring, and a sub-ring
            // with it passed.
            bool failed_whole = false;
            for (const auto& vm : r["vms"])
                for (const auto& c : vm["report"]["checks"])
                    if (c["name"] == failing) failed_whole = failed_whole || c["verdict"] == "fail";
            CHECK(failed_whole);
            bool passed_sub = false;
            for (const auto& run : r["localisation"]["runs"])
                for (const auto& m : run["members"]) passed_sub = passed_sub || (m == n.node && run["pass"] == true);
            CHECK(passed_sub);
        }
    }
    // The members waited for the first node's search parked, not each on a
    // thread (the search takes several sub-ring runs: some member arrives
    // before it is posted).
    CHECK(h.heard.text.find(" smoke waiting: the shared smoke ring's fault localisation by n001") != std::string::npos);
    // The handover hook heard of the bad nodes' quarantine only.
    std::set<std::string> quarantined;
    for (const auto& d : h.hook_documents())
        if (d.value("state", "") == "quarantined") quarantined.insert(d.value("node", ""));
    CHECK(quarantined == bad);
}

TEST_CASE("a shared ring that fails is searched: only the node that corrupts the sum is quarantined") {
    for (const std::string bad : {"n001", "n004", "n006"}) DYNAMIC_SECTION("the bad node is " << bad) {
            check_localised({bad});
        }
}

TEST_CASE("a shared ring with two bad nodes names both, and only both") {
    check_localised({"n002", "n005"});
}

TEST_CASE("a suspect node's VMs are each run beside a cleared node: the one VM that fails is named") {
    SmokeHarness h({{"allreduce_errors", 0}}, 6);
    share_ring(h, "fleet");
    h.transport->corrupt_vms = {"kiln-n004-vm1"};  // one VM's GPU or NIC, not the whole node
    auto report = h.run();
    REQUIRE(report.nodes.size() == 6);
    for (const auto& n : report.nodes) {
        INFO(n.node << ": " << n.state << " " << n.error);
        CHECK(n.state == (n.node == "n004" ? kiln::engine::NodeState::Quarantined : kiln::engine::NodeState::Ready));
    }
    auto r = result_of(h, "n004");
    INFO(r.dump());
    REQUIRE(r["localisation"]["suspects"] == json::array({"n004"}));
    const json& vms = r["localisation"]["vms"]["n004"];
    CHECK(vms["suspects"] == json::array({"kiln-n004-vm1"}));
    CHECK(vms["complete"] == true);
    REQUIRE(vms["runs"].size() == 2);
    CHECK(vms["runs"][0]["vm"] == "kiln-n004-vm0");
    CHECK(vms["runs"][0]["pass"] == true);
    CHECK(vms["runs"][1]["pass"] == false);
    // Named with the host parts it was given, the bad VM only.
    CHECK(vms["host_devices"]["kiln-n004-vm1"]["gpus"] == json::array({"0000:04:01.0"}));
    CHECK(vms["host_devices"]["kiln-n004-vm1"]["others"] == json::array({"0000:44:01.0"}));
    CHECK_FALSE(vms["host_devices"].contains("kiln-n004-vm0"));
    // The quarantine reason points at the VM.
    bool named = false;
    for (const auto& f : r["failed"])
        if (f["name"] == "fault_localisation")
            named = f["detail"].get<std::string>().find(
                        "only kiln-n004-vm1 (host GPU 0000:04:01.0; with 0000:44:01.0) fails") != std::string::npos;
    CHECK(named);
}

TEST_CASE("a shared ring whose member drops its links is searched: only that member is quarantined") {
    check_localised({"n003"}, RankFault::drop);
}

TEST_CASE("a shared ring under its bandwidth floor from one slow member is searched: only that member is quarantined") {
    check_localised({"n005"}, RankFault::slow_link);
}

TEST_CASE("a shared ring that passes is not searched") {
    SmokeHarness h({{"allreduce_errors", 0}}, 3);
    share_ring(h, "fleet");
    auto report = h.run();
    for (const auto& n : report.nodes) {
        CHECK(n.state == kiln::engine::NodeState::Ready);
        CHECK_FALSE(result_of(h, n.node).contains("localisation"));
        CHECK(h.transport->runs_by_node[n.node] == 1);
    }
}

TEST_CASE("a ring meeting that cannot close ends at the stage's deadline and names who is missing") {
    auto fleet = kiln::test::make_fleet(2, 1, {"smoke"});
    kiln::engine::StopToken stop;
    kiln::engine::StageContext ctx(fleet, fleet.nodes[0], "smoke", stop,
                                   kiln::engine::StageContext::Clock::now() + std::chrono::milliseconds(300), nullptr,
                                   nullptr);
    ctx.set_node_pending([](const std::string& n) { return n == "n002"; });
    kiln::smoke::RingMeeting meeting;
    auto met = meeting.meet(ctx, {"n001", "n002"});
    REQUIRE_FALSE(met.ok());
    CHECK(met.error().code == "smoke.ring");
    CHECK_THAT(met.error().message, Catch::Contains("still waiting for n002"));
    // n001 left that meeting: once n002 can no longer come, n001 meets alone.
    kiln::engine::StageContext again(fleet, fleet.nodes[0], "smoke", stop,
                                     kiln::engine::StageContext::Clock::now() + std::chrono::seconds(30), nullptr,
                                     nullptr);
    again.set_node_pending([](const std::string&) { return false; });
    auto alone = meeting.meet(again, {"n001", "n002"});
    REQUIRE(alone.ok());
    CHECK(*alone == std::vector<std::string>{"n001"});
}
