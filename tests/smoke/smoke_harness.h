// A fleet whose nodes run the smoke stage (kiln-smoke ranks as local
// processes, two "VMs" per node) and the handover stage with a command hook
// that appends each document to a file; a SQLite journal in a temp dir.
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/local_process_transport.h"
#include "pipelines/smoke/smoke_stage.h"
#include "provisioner/engine/engine.h"
#include "provisioner/handover/handover_stage.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/smoke/smoke_test_util.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/temp_dir.h"

namespace kiln::test {

struct SmokeHarness {
    TempDir dir;
    kiln::config::Fleet fleet;
    std::unique_ptr<kiln::journal::Store> store;
    kiln::engine::StageRegistry registry;
    kiln::engine::StopToken stop;
    std::string hook_file;

    explicit SmokeHarness(std::map<std::string, double> thresholds, int nodes = 1,
                          std::vector<std::string> stages = {"smoke", "handover"}) {
        fleet = kiln::test::make_fleet(nodes, 1, stages);
        fleet.dir = dir.path();
        kiln::config::SmokeProfile p;
        p.name = "quick";
        p.thresholds = std::move(thresholds);
        p.timeout = std::chrono::minutes(2);
        fleet.smoke[p.name] = p;
        for (auto& n : fleet.nodes) n.smoke = "quick";
        hook_file = dir.file("hook.json");
        kiln::config::HandoverHook hook;
        hook.command = {"/usr/bin/tee", "-a", hook_file};
        fleet.handover = hook;
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
        so.transport = std::make_shared<kiln::smoke::LocalProcessTransport>(lo);
        so.extra_args = kiln::test::quick_args();
        so.connect_timeout = std::chrono::seconds(20);
        so.on_quarantine = [handover](kiln::engine::StageContext& ctx, const nlohmann::json& r) {
            handover->notify_quarantined(ctx, r);
        };
        registry.add(std::make_shared<kiln::smoke::SmokeStage>(so));
        registry.add(handover);
    }
    // Gives one node its own smoke profile.
    void set_profile(const std::string& node, const std::string& name, std::map<std::string, double> thresholds) {
        kiln::config::SmokeProfile p;
        p.name = name;
        p.thresholds = std::move(thresholds);
        p.timeout = std::chrono::minutes(2);
        fleet.smoke[name] = p;
        for (auto& n : fleet.nodes)
            if (n.name == node) n.smoke = name;
    }
    kiln::engine::RunReport run(std::vector<std::string> nodes = {}) {
        kiln::engine::RunOptions o;
        o.seed = 1;
        o.nodes = std::move(nodes);
        kiln::engine::Engine e(fleet, registry, store.get(), nullptr, stop);
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
