// The network stage at fabric scale: within one engine plan or run each
// switch is read once for all the nodes cabled to it, apply reads its switch
// afresh, and what apply did is what the next reader sees. Reads are counted
// by a driver that wraps the real one (emulated NVUE and EOS switches).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>

#include "network/stage/network_inputs.h"
#include "network/stage/network_stage.h"
#include "network/switch_drivers.h"
#include "provisioner/engine/engine.h"
#include "provisioner/engine/input_hash.h"
#include "provisioner/engine/stage_registry.h"
#include "provisioner/journal/sqlite_store.h"
#include "provisioner/net/http_client.h"
#include "tests/network/fabric_test_util.h"

using namespace kiln;
using namespace kiln::test::fabric;
using nlohmann::json;

namespace {

struct Counts {
    std::atomic<int> reads{0};
    std::atomic<int> applies{0};
};

// The real driver, counting what reaches the switch.
class CountingDriver : public network::SwitchDriver {
public:
    CountingDriver(std::unique_ptr<network::SwitchDriver> real, Counts& counts)
        : real_(std::move(real)), counts_(counts) {}
    std::string os() const override { return real_->os(); }
    Result<json> render(const network::RoceProfile& profile, const std::vector<network::Port>& ports) const override {
        return real_->render(profile, ports);
    }
    Result<json> read_state() override {
        ++counts_.reads;
        return real_->read_state();
    }
    json project_running(const json& state, const std::vector<network::Port>& ports) const override {
        return real_->project_running(state, ports);
    }
    std::vector<network::ConfigChange> diff(const json& desired, const json& running) const override {
        return real_->diff(desired, running);
    }
    Status apply(const json& desired, const json& running) override {
        ++counts_.applies;
        return real_->apply(desired, running);
    }

private:
    std::unique_ptr<network::SwitchDriver> real_;
    Counts& counts_;
};

std::shared_ptr<network::NetworkStage> counting_stage(Counts& counts) {
    return std::make_shared<network::NetworkStage>(
        [&counts](const config::Fleet& fleet,
                  const config::Switch& sw) -> Result<std::unique_ptr<network::SwitchDriver>> {
            network::SwitchDriverDeps deps;
            deps.nvue.poll_interval = std::chrono::milliseconds(10);
            auto real = network::make_switch_driver(fleet, sw, deps);
            if (!real) return real.error();
            return std::unique_ptr<network::SwitchDriver>(new CountingDriver(std::move(*real), counts));
        });
}

// Two switches (NVUE, EOS) of four ports; four nodes, each on both.
struct Fabric4 {
    Emulators emu;
    std::unique_ptr<FleetFile> fleet;
    Fabric4() {
        const auto n = emu.start("leaf-n", "nvue");
        const auto e = emu.start("leaf-e", "eos");
        fleet =
            write_fleet(fleet_toml({{"leaf-n", "nvue", n, {"swp1", "swp2", "swp3", "swp4"}},
                                    {"leaf-e", "eos", e, {"Ethernet1/1", "Ethernet2/1", "Ethernet3/1", "Ethernet4/1"}}},
                                   4));
        INFO(fleet->errors());
        REQUIRE(fleet->loaded.fleet);
    }
    const config::Fleet& f() const { return *fleet->loaded.fleet; }
};

engine::StageContext context(const config::Fleet& fleet, const config::Node& node, const engine::StopToken& stop) {
    return engine::StageContext(fleet, node, "network", stop,
                                engine::StageContext::Clock::now() + std::chrono::minutes(5), nullptr, nullptr);
}

// Each node's actions as JSON, from the engine's plan.
json plan_of(const config::Fleet& fleet, engine::StageRegistry& registry) {
    engine::StopToken stop;
    engine::Engine eng(fleet, registry, nullptr, nullptr, stop);
    engine::RunOptions opts;
    opts.command = "plan";
    auto report = eng.plan(opts);
    REQUIRE(report);
    json out = json::object();
    for (const auto& e : report->entries) {
        INFO(e.node << ": " << e.error);
        REQUIRE(e.status != kiln::engine::PlanStatus::Error);
        json actions = json::array();
        for (const auto& a : e.actions)
            actions.push_back({{"id", a.id}, {"description", a.description}, {"detail", a.detail}});
        out[e.node] = actions;
    }
    return out;
}

// The same, each node observed on its own outside a run (every call reads).
json plan_outside_run(const config::Fleet& fleet, network::NetworkStage& stage) {
    engine::StopToken stop;
    json out = json::object();
    for (const auto& node : fleet.nodes) {
        auto ctx = context(fleet, node, stop);
        auto obs = stage.observe(ctx);
        REQUIRE(obs);
        auto plan = stage.plan(ctx, *obs);
        REQUIRE(plan);
        json actions = json::array();
        for (const auto& a : *plan)
            actions.push_back({{"id", a.id}, {"description", a.description}, {"detail", a.detail}});
        out[node.name] = actions;
    }
    return out;
}

// A plan run through the engine lists each shared change (uplinks, core
// links, switch-wide settings) in full under one node and as a count under
// the others; outside a run (`own`) every node lists all of its changes.
// Checks that both plans hold the same work: the same actions per node,
// each node's total the same, and the changes listed in `shared` are the
// ones of `own`, each exactly once, and every count names a node that
// lists changes on that switch.
void check_same_work(const json& shared, const json& own) {
    std::multiset<std::string> listed;
    std::set<std::string> wanted;
    REQUIRE(shared.size() == own.size());
    for (const auto& [node, actions] : own.items()) {
        INFO(node);
        REQUIRE(shared.contains(node));
        const json& mine = shared[node];
        REQUIRE(mine.size() == actions.size());
        for (size_t a = 0; a < actions.size(); ++a) {
            CHECK(mine[a]["id"] == actions[a]["id"]);
            CHECK_FALSE(actions[a]["detail"].contains("shared"));
            size_t total = mine[a]["detail"]["changes"].size();
            for (const auto& g : mine[a]["detail"].value("shared", json::array())) {
                CHECK(g["listed_under"] != node);
                total += g["changes"].get<size_t>();
                bool lists = false;
                for (const auto& other : shared[g["listed_under"].get<std::string>()])
                    if (other["id"] == mine[a]["id"] && !other["detail"]["changes"].empty()) lists = true;
                CHECK(lists);
            }
            CHECK(total == actions[a]["detail"]["changes"].size());
            for (const auto& c : mine[a]["detail"]["changes"]) listed.insert(c.dump());
            for (const auto& c : actions[a]["detail"]["changes"]) wanted.insert(c.dump());
        }
    }
    CHECK(std::set<std::string>(listed.begin(), listed.end()) == wanted);
    CHECK(listed.size() == wanted.size());  // none listed twice
}

}  // namespace

TEST_CASE("network plan at scale: one read per switch, not per node, with the same actions") {
    Fabric4 lab;
    Counts counts;
    auto stage = counting_stage(counts);
    engine::StageRegistry registry;
    registry.add(stage);

    const json shared = plan_of(lab.f(), registry);
    CHECK(counts.reads == 2);  // 2 switches; 4 nodes x 2 switches before
    CHECK(counts.applies == 0);

    counts.reads = 0;
    const json own = plan_outside_run(lab.f(), *stage);
    CHECK(counts.reads == 8);  // outside a run each node reads for itself
    check_same_work(shared, own);
    REQUIRE(shared["n3"].size() == 2);
    // A node's plan names its own ports, never a neighbour's.
    const std::string text = shared["n3"].dump();
    CHECK_THAT(text, Catch::Contains("swp3"));
    CHECK_THAT(text, !Catch::Contains("swp2"));
    CHECK_THAT(text, !Catch::Contains("Ethernet4/1"));

    // A second plan reads again: nothing is kept between runs.
    counts.reads = 0;
    CHECK(plan_of(lab.f(), registry) == shared);
    CHECK(counts.reads == 2);
}

TEST_CASE("network plan at scale: apply reads its switch afresh and later readers see what it did") {
    Fabric4 lab;
    Counts counts;
    auto stage = counting_stage(counts);
    const config::Fleet& fleet = lab.f();
    engine::StopToken stop;
    stage->begin_run(fleet);

    auto n1 = context(fleet, fleet.nodes[0], stop);
    auto obs1 = stage->observe(n1);
    REQUIRE(obs1);
    auto plan1 = stage->plan(n1, *obs1);
    REQUIRE(plan1);
    REQUIRE(plan1->size() == 2);
    CHECK(counts.reads == 2);

    // Behind the plan's back, n1's NVUE port is made right: apply must see
    // that (a fresh read), not act on the plan's read.
    auto driver = network::make_switch_driver(fleet, *fleet.find_switch("leaf-n"), {});
    REQUIRE(driver);
    {
        network::SwitchScope scope;
        scope.sw = fleet.find_switch("leaf-n");
        scope.profile = &kiln::network::network_profiles(fleet)->at("roce");
        network::Port p;
        p.name = "swp1";
        scope.ports = {p};
        auto cmp = network::compare_switch(**driver, scope);
        REQUIRE(cmp);
        REQUIRE((*driver)->apply(cmp->desired, cmp->running));
    }
    const auto& leaf_n = (*plan1)[0].id == "configure:leaf-n" ? (*plan1)[0] : (*plan1)[1];
    REQUIRE(leaf_n.id == "configure:leaf-n");
    CHECK(stage->apply(n1, leaf_n));
    CHECK(counts.reads == 3);    // apply read leaf-n again
    CHECK(counts.applies == 0);  // and found nothing left to do

    const auto& leaf_e = (*plan1)[0].id == "configure:leaf-e" ? (*plan1)[0] : (*plan1)[1];
    REQUIRE(stage->apply(n1, leaf_e));
    CHECK(counts.reads == 4);
    CHECK(counts.applies == 1);

    // verify reads leaf-e again (the apply dropped the shared read) and
    // passes; leaf-n's read from the plan still stands (nothing applied there).
    REQUIRE(stage->verify(n1));
    CHECK(counts.reads == 5);

    // n2 shares the reads verify left: the switch-wide settings n1's apply
    // made are no longer work for it; its own port still is.
    auto n2 = context(fleet, fleet.nodes[1], stop);
    auto obs2 = stage->observe(n2);
    REQUIRE(obs2);
    CHECK(counts.reads == 5);
    json leaf_e2;
    for (const auto& s : obs2->state["switches"])
        if (s["switch"] == "leaf-e") leaf_e2 = s;
    REQUIRE(!leaf_e2.is_null());
    REQUIRE_FALSE(leaf_e2["changes"].empty());
    for (const auto& c : leaf_e2["changes"]) CHECK(c["port"] == "Ethernet2/1");
    stage->end_run(fleet);

    // The whole run through the engine: every node ends verified, and a
    // plan after it has nothing to do.
    auto store = journal::open_sqlite_store(lab.fleet->dir.file("journal.db"), {});
    REQUIRE(store.ok());
    engine::StageRegistry registry;
    registry.add(stage);
    engine::Engine eng(fleet, registry, store->get(), nullptr, stop);
    engine::RunOptions opts;
    opts.command = "apply";
    auto run = eng.run(opts);
    REQUIRE(run);
    for (const auto& n : run->nodes) {
        INFO(n.node << ": " << n.error);
        CHECK(n.error.empty());
    }
    counts.reads = 0;
    const json after = plan_of(fleet, registry);
    for (const auto& [node, actions] : after.items()) CHECK(actions.empty());
    CHECK(counts.reads == 2);
}

namespace {

// Two leaves and a spine: n1, n2 on leaf-n (NVUE) swp1, swp2; n3, n4 on
// leaf-e (EOS) Ethernet1/1, 2/1; leaf-n swp3 -> spine-e Ethernet1/1 and
// leaf-e Ethernet3/1 -> spine-e Ethernet2/1 (EOS). spine-e Ethernet3/1 is
// declared and not cabled.
struct SpineLab {
    Emulators emu;
    std::unique_ptr<FleetFile> fleet;
    SpineLab() {
        const auto n = emu.start("leaf-n", "nvue");
        const auto e = emu.start("leaf-e", "eos");
        const auto s = emu.start("spine-e", "eos");
        fleet =
            write_fleet(fleet_toml({{"leaf-n", "nvue", n, {"swp1", "swp2", "swp3"}, false, 1, 2},
                                    {"leaf-e", "eos", e, {"Ethernet1/1", "Ethernet2/1", "Ethernet3/1"}, false, 3, 2},
                                    {"spine-e", "eos", s, {"Ethernet1/1", "Ethernet2/1", "Ethernet3/1"}, true}},
                                   4) +
                        uplink_toml("leaf-n", "swp3", "spine-e", "Ethernet1/1") +
                        uplink_toml("leaf-e", "Ethernet3/1", "spine-e", "Ethernet2/1"));
        INFO(fleet->errors());
        REQUIRE(fleet->loaded.fleet);
    }
    const config::Fleet& f() const { return *fleet->loaded.fleet; }
};

// The ports the changes of `actions` (one node's plan) name on `sw`; not the
// switch-wide ones (the DSCP map, the watchdog), which name none.
std::set<std::string> ports_changed(const json& actions, const std::string& sw) {
    std::set<std::string> out;
    for (const auto& a : actions)
        if (a["id"] == "configure:" + sw)
            for (const auto& c : a["detail"]["changes"])
                if (!c["port"].get<std::string>().empty()) out.insert(c["port"].get<std::string>());
    return out;
}

// An engine `apply` journalled in `journal`; the nodes that failed, with their errors.
json run_apply(const config::Fleet& fleet, engine::StageRegistry& registry, const std::string& journal) {
    auto store = journal::open_sqlite_store(journal, {});
    REQUIRE(store.ok());
    engine::StopToken stop;
    engine::Engine eng(fleet, registry, store->get(), nullptr, stop);
    engine::RunOptions opts;
    opts.command = "apply";
    auto run = eng.run(opts);
    REQUIRE(run);
    json errors = json::object();
    for (const auto& n : run->nodes)
        if (!n.error.empty()) errors[n.node] = n.error;
    return errors;
}

}  // namespace

TEST_CASE("network plan with spines: each node configures its leaf's uplink and the spine port facing it") {
    SpineLab lab;
    Counts counts;
    auto stage = counting_stage(counts);
    engine::StageRegistry registry;
    registry.add(stage);
    const config::Fleet& fleet = lab.f();

    // Only the leaves are held for the node's stage: the spine, which every
    // node crosses, is changed under kiln's own lock, so nodes of the two
    // leaves are not run one at a time.
    CHECK(stage->resources(fleet, fleet.nodes[0]) == std::vector<std::string>{"switch:leaf-n"});
    CHECK(stage->resources(fleet, fleet.nodes[3]) == std::vector<std::string>{"switch:leaf-e"});

    const json shared = plan_of(fleet, registry);
    CHECK(counts.reads == 3);  // each switch once, the spine included
    counts.reads = 0;
    const json own = plan_outside_run(fleet, *stage);
    CHECK(counts.reads == 8);  // 4 nodes x (leaf + spine)
    check_same_work(shared, own);

    REQUIRE(shared["n1"].size() == 2);
    CHECK(shared["n1"][0]["id"] == "configure:leaf-n");
    CHECK(shared["n1"][1]["id"] == "configure:spine-e");
    // Outside a run each node lists its own port and its leaf's uplink; on
    // the spine, only the port facing its leaf.
    CHECK(ports_changed(own["n1"], "leaf-n") == std::set<std::string>{"swp1", "swp3"});
    CHECK(ports_changed(own["n1"], "spine-e") == std::set<std::string>{"Ethernet1/1"});
    CHECK(ports_changed(own["n4"], "spine-e") == std::set<std::string>{"Ethernet2/1"});
    CHECK(ports_changed(own["n4"], "leaf-e") == std::set<std::string>{"Ethernet2/1", "Ethernet3/1"});
    // In a plan the first node of each leaf lists the uplink's changes at
    // both ends; its neighbour lists its own port and counts the rest.
    CHECK(ports_changed(shared["n1"], "leaf-n") == std::set<std::string>{"swp1", "swp3"});
    CHECK(ports_changed(shared["n1"], "spine-e") == std::set<std::string>{"Ethernet1/1"});
    CHECK(ports_changed(shared["n3"], "spine-e") == std::set<std::string>{"Ethernet2/1"});
    CHECK(ports_changed(shared["n3"], "leaf-e") == std::set<std::string>{"Ethernet1/1", "Ethernet3/1"});
    CHECK(ports_changed(shared["n4"], "leaf-e") == std::set<std::string>{"Ethernet2/1"});
    CHECK(ports_changed(shared["n4"], "spine-e").empty());
    REQUIRE(shared["n4"][1]["id"] == "configure:spine-e");
    const json n4_spine = shared["n4"][1];
    // The uplink facing leaf-e under n3, the spine's switch-wide settings
    // under n1 (the first node whose traffic crosses the spine).
    std::set<std::string> owners;
    for (const auto& g : n4_spine["detail"]["shared"]) owners.insert(g["listed_under"].get<std::string>());
    CHECK(owners == std::set<std::string>{"n1", "n3"});
    CHECK_THAT(n4_spine["description"].get<std::string>(), Catch::Contains("listed under n3"));
    CHECK_FALSE(shared["n1"][1]["detail"].contains("shared"));  // n1 lists all it shares on the spine
    CHECK_FALSE(shared["n1"][1]["detail"]["changes"].empty());

    // A plan of n4 alone lists every change n4's apply would make under n4.
    {
        engine::StopToken stop;
        engine::Engine eng(fleet, registry, nullptr, nullptr, stop);
        engine::RunOptions opts;
        opts.command = "plan";
        opts.nodes = {"n4"};
        auto alone = eng.plan(opts);
        REQUIRE(alone);
        REQUIRE(alone->entries.size() == 1);
        REQUIRE(alone->entries[0].actions.size() == 2);
        for (size_t a = 0; a < 2; ++a) {
            CHECK(alone->entries[0].actions[a].detail["changes"] == own["n4"][a]["detail"]["changes"]);
            CHECK_FALSE(alone->entries[0].actions[a].detail.contains("shared"));
        }
    }

    // Apply through the engine: every node verified, the spine lossless on both uplinks.
    CHECK(run_apply(fleet, registry, lab.fleet->dir.file("journal.db")).empty());
    const json spine = lab.emu.get("spine-e").running()["cmds"];
    INFO(spine.dump());
    CHECK(spine.contains("qos map dscp 26 to traffic-class 3"));
    for (const char* port : {"interface Ethernet1/1", "interface Ethernet2/1"}) {
        REQUIRE(spine.contains(port));
        CHECK(spine[port]["cmds"].contains("priority-flow-control priority 3 no-drop"));
        CHECK(spine[port]["cmds"].contains("priority-flow-control on"));
    }
    CHECK_FALSE(spine.contains("interface Ethernet3/1"));  // not cabled: left alone
    CHECK(lab.emu.get("leaf-n").running()["interface"]["swp3"]["link"]["mtu"] == 9216);

    counts.reads = 0;
    const json after = plan_of(fleet, registry);
    for (const auto& [node, actions] : after.items()) CHECK(actions.empty());
    CHECK(counts.reads == 3);

    // Drift on the spine port facing leaf-e is work for leaf-e's nodes only.
    REQUIRE(lab.emu.get("spine-e").change_behind_back(
        {{"cmds", {"interface Ethernet2/1", "no priority-flow-control priority 3 no-drop"}}}));
    const json drift = plan_of(fleet, registry);
    CHECK(drift["n1"].empty());
    CHECK(drift["n2"].empty());
    REQUIRE(drift["n3"].size() == 1);
    CHECK(drift["n3"][0]["id"] == "configure:spine-e");
    CHECK(ports_changed(drift["n3"], "spine-e") == std::set<std::string>{"Ethernet2/1"});
    CHECK_THAT(drift["n3"][0]["description"].get<std::string>(), Catch::Contains("Ethernet2/1 pfc-no-drop"));
    CHECK(run_apply(fleet, registry, lab.fleet->dir.file("journal.db")).empty());
    CHECK(lab.emu.get("spine-e").running()["cmds"]["interface Ethernet2/1"]["cmds"].contains(
        "priority-flow-control priority 3 no-drop"));
    const json repaired = plan_of(fleet, registry);
    for (const auto& [node, actions] : repaired.items()) CHECK(actions.empty());
}

TEST_CASE("network plan with spines: shared changes are resolved once per switch and set of leaves, not per node") {
    SpineLab lab;
    Counts counts;
    auto stage = counting_stage(counts);
    engine::StageRegistry registry;
    registry.add(stage);
    const config::Fleet& fleet = lab.f();

    // Two leaves of two nodes each, under one spine: a node's scope is its
    // leaf and the spine, 8 node-switch pairs; the sets of leaves are 2, so
    // 4 (switch, leaves) pairs are resolved and the second node of each
    // leaf takes the first one's.
    const auto before = stage->counters();
    const json shared = plan_of(fleet, registry);
    const auto after = stage->counters();
    CHECK(after.shared_resolved - before.shared_resolved == 4);
    CHECK(after.uplinks_serialised - before.uplinks_serialised == fleet.uplinks.size());  // once per run, not per node
    // ... and what the second node takes is what it would have computed on its own.
    const json own = plan_outside_run(fleet, *stage);
    check_same_work(shared, own);
    CHECK(shared["n2"][0]["detail"]["shared"][0]["listed_under"] == "n1");
    CHECK(shared["n4"][1]["detail"]["shared"].size() == 2);  // the uplink under n3, the switch-wide settings under n1

    // A plan of n2 alone resolves its own: it lists all of its changes.
    engine::StopToken stop;
    engine::Engine eng(fleet, registry, nullptr, nullptr, stop);
    engine::RunOptions opts;
    opts.command = "plan";
    opts.nodes = {"n2"};
    auto alone = eng.plan(opts);
    REQUIRE(alone);
    REQUIRE(alone->entries.size() == 1);
    REQUIRE(alone->entries[0].actions.size() == own["n2"].size());
    for (size_t a = 0; a < own["n2"].size(); ++a)
        CHECK(alone->entries[0].actions[a].detail["changes"] == own["n2"][a]["detail"]["changes"]);
}

TEST_CASE("network input hashes: within a run uplinks are serialised once, and every node hashes what it did before") {
    SpineLab lab;
    const config::Fleet& fleet = lab.f();
    Counts counts;
    auto stage = counting_stage(counts);
    engine::StopToken stop;
    // network_inputs's text, outside a run and inside one (uplink entries
    // serialised once and spliced in), for every node: the same bytes.
    std::vector<std::string> outside;
    for (const auto& node : fleet.nodes) {
        auto ctx = context(fleet, node, stop);
        auto text = stage->input_text(ctx);
        REQUIRE(text);
        CHECK(*text == kiln::network::network_inputs(fleet, node).dump());
        CHECK_THAT(*text, Catch::Contains("\"uplinks\":[{"));
        outside.push_back(*text);
    }
    stage->begin_run(fleet);
    for (size_t k = 0; k < fleet.nodes.size(); ++k) {
        auto ctx = context(fleet, fleet.nodes[k], stop);
        auto text = stage->input_text(ctx);
        REQUIRE(text);
        CHECK(*text == outside[k]);
    }
    stage->end_run(fleet);

    // The keys only some fleets have: cable and uplink lengths, written ECN
    // keys, a managed host, a node with no cable (no uplinks), two racks.
    auto varied = write_fleet(
        fleet_toml({{"leaf-n", "nvue", "127.0.0.1:1", {"swp1", "swp2", "swp3"}, false, 1, 2},
                    {"leaf-e", "eos", "127.0.0.1:2", {"Ethernet1/1", "Ethernet2/1", "Ethernet3/1"}, false, 2, 1},
                    {"spine-e", "eos", "127.0.0.1:3", {"Ethernet1/1", "Ethernet2/1"}, true}},
                   3, "ecn_min_kb = 120\n") +
        uplink_toml("leaf-n", "swp3", "spine-e", "Ethernet1/1") +
        uplink_toml("leaf-e", "Ethernet3/1", "spine-e", "Ethernet2/1", "cable_length_m = 100\n") +
        "[[racks]]\nname = \"r2\"\nswitches = [\"leaf-e\"]\n"
        "[[nodes]]\nname = \"n4\"\nrack = \"r2\"\nhost = { netns = \"kiln-n4\" }\n"
        "nics = [{ name = \"mlx5_1\", ifname = \"rdma1\" }]\n"
        "[[cabling]]\nnode = \"n4\"\nnic = \"mlx5_1\"\nswitch = \"leaf-e\"\nport = \"Ethernet2/1\"\n"
        "cable_length_m = 7\n");
    INFO(varied->errors());
    REQUIRE(varied->loaded.fleet);
    const config::Fleet& vf = *varied->loaded.fleet;
    REQUIRE(vf.nodes.size() == 4);
    stage->begin_run(vf);
    for (const auto& node : vf.nodes) {
        INFO(node.name);
        auto ctx = context(vf, node, stop);
        auto text = stage->input_text(ctx);
        REQUIRE(text);
        CHECK(*text == kiln::network::network_inputs(vf, node).dump());
    }
    stage->end_run(vf);
    const auto n4 = kiln::network::network_inputs(vf, vf.nodes[3]);
    CHECK(n4.contains("host"));
    CHECK(n4["cables"][0]["cable_length_m"] == 7);
    CHECK(n4["uplinks"][0]["cable_length_m"] == 100);
    CHECK_FALSE(kiln::network::network_inputs(vf, vf.nodes[2]).contains("uplinks"));  // n3: no cable

    // Through the engine (which hashes inside its run): each node's hash is
    // the one chained from network_inputs, so journals stay valid.
    engine::StageRegistry registry;
    registry.add(stage);
    engine::Engine eng(fleet, registry, nullptr, nullptr, stop);
    engine::RunOptions opts;
    opts.command = "plan";
    auto report = eng.plan(opts);
    REQUIRE(report);
    REQUIRE(report->entries.size() == fleet.nodes.size());
    for (const auto& e : report->entries) {
        const config::Node* node = fleet.find_node(e.node);
        REQUIRE(node);
        CHECK(e.input_hash == engine::chain_hash("network", kiln::network::network_inputs(fleet, *node), ""));
    }
}

namespace {

// The spine's driver, holding each apply open until a second one enters or
// a bound passes: with kiln's per-switch apply lock the second waits outside
// and never enters, without it both are inside at once.
struct SpineGate {
    std::mutex mu;
    std::condition_variable cv;
    int inside = 0;
    int most_inside = 0;
    int applies = 0;
};

class GatedDriver : public network::SwitchDriver {
public:
    GatedDriver(std::unique_ptr<network::SwitchDriver> real, SpineGate& gate) : real_(std::move(real)), gate_(gate) {}
    std::string os() const override { return real_->os(); }
    Result<json> render(const network::RoceProfile& profile, const std::vector<network::Port>& ports) const override {
        return real_->render(profile, ports);
    }
    Result<json> read_state() override { return real_->read_state(); }
    json project_running(const json& state, const std::vector<network::Port>& ports) const override {
        return real_->project_running(state, ports);
    }
    std::vector<network::ConfigChange> diff(const json& desired, const json& running) const override {
        return real_->diff(desired, running);
    }
    Status apply(const json& desired, const json& running) override {
        {
            std::unique_lock<std::mutex> lk(gate_.mu);
            ++gate_.applies;
            gate_.most_inside = std::max(gate_.most_inside, ++gate_.inside);
            gate_.cv.notify_all();
            // Not a timing assertion: the bound only ends the wait for an
            // entry that the lock must prevent.
            gate_.cv.wait_for(lk, std::chrono::seconds(2), [&] { return gate_.inside >= 2; });
        }
        auto st = real_->apply(desired, running);
        std::lock_guard<std::mutex> lk(gate_.mu);
        --gate_.inside;
        gate_.cv.notify_all();
        return st;
    }

private:
    std::unique_ptr<network::SwitchDriver> real_;
    SpineGate& gate_;
};

}  // namespace

TEST_CASE("network apply with spines: nodes of different leaves change the shared spine one at a time") {
    SpineLab lab;
    const auto& fleet = lab.f();
    SpineGate gate;
    auto stage = std::make_shared<network::NetworkStage>(
        [&gate](const config::Fleet& f, const config::Switch& sw) -> Result<std::unique_ptr<network::SwitchDriver>> {
            network::SwitchDriverDeps deps;
            auto real = network::make_switch_driver(f, sw, deps);
            if (!real) return real.error();
            if (sw.name != "spine-e") return std::move(*real);
            return std::unique_ptr<network::SwitchDriver>(new GatedDriver(std::move(*real), gate));
        });
    engine::StageRegistry registry;
    registry.add(stage);
    // n1 (leaf-n) and n3 (leaf-e) run at once: the engine holds only their
    // own leaves, and each has its uplink's spine port to change.
    const json errors = run_apply(fleet, registry, lab.fleet->dir.file("journal.db"));
    INFO(errors.dump());
    CHECK(errors.empty());
    {
        std::lock_guard<std::mutex> lk(gate.mu);
        CHECK(gate.applies >= 2);  // both leaves' nodes changed the spine
        CHECK(gate.most_inside == 1);
    }
    // Neither change was lost to the other: nothing is left to do anywhere.
    const json after = plan_of(fleet, registry);
    for (const auto& [node, actions] : after.items()) {
        INFO(node);
        CHECK(actions.empty());
    }
}

TEST_CASE("kiln-switch serves more switches than select() can watch (FD_SETSIZE)") {
    // 600 switches hold 1,200+ descriptors: the last ones are past 1,024.
    constexpr int kSwitches = 600;
    ::setenv("KILN_TEST_SWITCH_BIN_PASSWORD", "pw", 1);
    std::vector<std::string> args{KILN_SWITCH_BINARY, "--listen", "127.0.0.1:0", "--password-env",
                                  "KILN_TEST_SWITCH_BIN_PASSWORD"};
    for (int i = 0; i < kSwitches; ++i) {
        args.push_back("--switch");
        args.push_back(fmt::format("s{}:{}", i, i % 2 ? "eos" : "nvue"));
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    REQUIRE(::pipe(out) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(out[1], 1);
        ::dup2(out[1], 2);
        ::close(out[0]);
        ::execv(KILN_SWITCH_BINARY, argv.data());
        ::_exit(127);
    }
    ::close(out[1]);
    std::string text;
    char buf[4096];
    while (std::count(text.begin(), text.end(), '\n') < kSwitches) {
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    INFO(text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
    const std::string last = fmt::format("switch s{} (eos): ", kSwitches - 1);
    const auto at = text.find(last);
    REQUIRE(at != std::string::npos);
    const std::string url = text.substr(at + last.size(), text.find('\n', at) - at - last.size());

    // The last switch answers, and so does the first.
    kiln::net::CurlHttpClient http;
    for (const std::string& u : {url, text.substr(text.find("http://"), text.find('\n') - text.find("http://"))}) {
        kiln::net::HttpRequest req;
        req.url = u + "/_emulator/faults";
        req.basic_user = "admin";
        req.basic_password = "pw";
        auto r = http.send(req);
        INFO(u);
        REQUIRE(r);
        CHECK(r->status == 200);
    }
    ::kill(pid, SIGTERM);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::close(out[0]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
