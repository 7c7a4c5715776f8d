// A fleet whose nodes run the smoke stage (kiln-smoke ranks as local
// processes, two "VMs" per node) and the handover stage with a command hook
// that appends each document to a file; a SQLite journal in a temp dir.
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/stage/local_process_transport.h"
#include "pipelines/smoke/stage/smoke_config.h"
#include "pipelines/smoke/stage/smoke_stage.h"
#include "provisioner/engine/engine.h"
#include "provisioner/handover/stage/handover_config.h"
#include "provisioner/handover/stage/handover_stage.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/smoke/smoke_test_util.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/temp_dir.h"

namespace kiln::test {

// The local transport, with the ranks of chosen nodes corrupting their
// all-reduce contribution (kiln-smoke's hidden test hook), as ranks behind
// a bad link would.
class FaultyRanksTransport : public kiln::smoke::SmokeTransport {
public:
    explicit FaultyRanksTransport(std::shared_ptr<kiln::smoke::SmokeTransport> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return inner_->name(); }
    kiln::Result<std::vector<std::string>> list_vms(const kiln::config::Node& node) override {
        return inner_->list_vms(node);
    }
    kiln::smoke::RankAddress address(int ordinal) const override { return inner_->address(ordinal); }
    kiln::Result<std::vector<kiln::smoke::RankOutput>> run(const kiln::config::Node& node,
                                                           const std::vector<kiln::smoke::RankLaunch>& ranks,
                                                           std::chrono::milliseconds timeout) override {
        auto launched = ranks;
        for (auto& r : launched) {
            if (corrupt.count(node.name) || corrupt_vms.count(r.vm)) r.args.push_back("--test-corrupt-allreduce");
            if (drop.count(node.name)) r.args.push_back("--test-drop-allreduce");
            if (slow_link.count(node.name))
                r.args.insert(r.args.end(), {"--test-allreduce-step-delay-ms", std::to_string(slow_link_step.count())});
        }
        {
            std::lock_guard<std::mutex> lk(mu);
            runs_by_node[node.name]++;
            for (const auto& r : launched) args_by_vm[r.vm] = r.args;
        }
        auto out = inner_->run(node, launched, timeout);
        if (late.count(node.name)) std::this_thread::sleep_for(late_by);
        return out;
    }
    // Set before the run: these nodes' ranks corrupt the sum, drop their
    // ring links, or wait `slow_link_step` before each ring step.
    std::set<std::string> corrupt, drop, slow_link;
    std::set<std::string> corrupt_vms;  // these VMs' ranks only corrupt the sum
    std::chrono::milliseconds slow_link_step{0};
    // These nodes' runs return `late_by` after their ranks ended (a member
    // whose transport is slow to bring the reports back).
    std::set<std::string> late;
    std::chrono::milliseconds late_by{0};
    std::mutex mu;
    std::map<std::string, int> runs_by_node;                     // transport runs per node
    std::map<std::string, std::vector<std::string>> args_by_vm;  // each VM's last kiln-smoke arguments

private:
    std::shared_ptr<kiln::smoke::SmokeTransport> inner_;
};

struct SmokeHarness {
    TempDir dir;
    kiln::config::Fleet fleet;
    std::unique_ptr<kiln::journal::Store> store;
    kiln::engine::StageRegistry registry;
    kiln::engine::StopToken stop;
    std::string hook_file;
    std::shared_ptr<FaultyRanksTransport> transport;

    explicit SmokeHarness(std::map<std::string, double> thresholds, int nodes = 1,
                          const std::vector<std::string>& stages = {"smoke", "handover"}) {
        fleet = kiln::test::make_fleet(nodes, 1, stages);
        fleet.dir = dir.path();
        kiln::smoke::SmokeProfile p;
        p.name = "quick";
        p.thresholds = std::move(thresholds);
        p.timeout = std::chrono::minutes(2);
        kiln::smoke::add_smoke_profile(fleet, p);
        for (auto& n : fleet.nodes) n.set_profile(kiln::smoke::kSmokeTable, "quick");
        hook_file = dir.file("hook.json");
        kiln::handover::HandoverHook hook;
        hook.command = {"/usr/bin/tee", "-a", hook_file};
        kiln::handover::set_handover_hook(fleet, hook);
        auto s = kiln::journal::open_sqlite_store(dir.file("journal.db"), {});
        REQUIRE(s.ok());
        store = std::move(*s);

        kiln::smoke::LocalProcessOptions lo;
        lo.smoke_binary = KILN_SMOKE_BINARY;
        lo.vms_per_node = 2;
        lo.port_base = kiln::test::free_port_range(2 * nodes);
        REQUIRE(lo.port_base > 0);
        auto handover = std::make_shared<kiln::handover::HandoverStage>();
        kiln::smoke::SmokeStageOptions so;
        transport = std::make_shared<FaultyRanksTransport>(std::make_shared<kiln::smoke::LocalProcessTransport>(lo));
        so.transport = transport;
        so.extra_args = kiln::test::quick_args();
        so.connect_timeout = std::chrono::seconds(20);
        so.on_quarantine = [handover](kiln::engine::StageContext& ctx, const nlohmann::json& r) {
            handover->notify_quarantined(ctx, r);
        };
        // A model of the vm stage's placement (the real one is tested in
        // tests/vm): VM k of node n00N holds GPU 0000:0N:0k.0 and NIC
        // 0000:4N:0k.0.
        so.vm_host_devices = [](const kiln::config::Fleet&, const kiln::config::Node& node,
                                const std::string& vm) -> kiln::Result<kiln::smoke::SmokeStageOptions::VmDevices> {
            const std::string n = node.name.substr(node.name.size() - 1), k = vm.substr(vm.size() - 1);
            return kiln::smoke::SmokeStageOptions::VmDevices{{"0000:0" + n + ":0" + k + ".0"},
                                                             {"0000:4" + n + ":0" + k + ".0"}};
        };
        registry.add(std::make_shared<kiln::smoke::SmokeStage>(so));
        registry.add(handover);
    }
    // Gives one node its own smoke profile.
    void set_profile(const std::string& node, const std::string& name, std::map<std::string, double> thresholds) {
        kiln::smoke::SmokeProfile p;
        p.name = name;
        p.thresholds = std::move(thresholds);
        p.timeout = std::chrono::minutes(2);
        kiln::smoke::add_smoke_profile(fleet, p);
        for (auto& n : fleet.nodes)
            if (n.name == node) n.set_profile(kiln::smoke::kSmokeTable, name);
    }
    // Every engine event as "node stage message outcome" lines.
    struct HeardSink : kiln::engine::EventSink {
        void on_event(const kiln::engine::EngineEvent& e) override {
            std::lock_guard<std::mutex> lock(mu);
            text += e.node + " " + e.stage + " " + e.message + " " + e.outcome + "\n";
        }
        std::mutex mu;
        std::string text;
    };
    HeardSink heard;
    kiln::engine::RunReport run(std::vector<std::string> nodes = {}) {
        kiln::engine::RunOptions o;
        o.seed = 1;
        o.nodes = std::move(nodes);
        kiln::engine::Engine e(fleet, registry, store.get(), &heard, stop);
        auto r = e.run(o);
        REQUIRE(r.ok());
        return *r;
    }
    std::vector<nlohmann::json> hook_documents() const {
        std::vector<nlohmann::json> out;
        std::ifstream in(hook_file);
        std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // tee -a appends one compact document per call.
        size_t start = 0;
        while (start < all.size()) {
            size_t end = all.find("}{", start);
            std::string one = all.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
            out.push_back(nlohmann::json::parse(one));
            if (end == std::string::npos) break;
            start = end + 1;
        }
        return out;
    }
};

}  // namespace kiln::test
