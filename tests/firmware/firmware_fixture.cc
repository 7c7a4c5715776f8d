#include "tests/firmware/firmware_fixture.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "firmware/stage/firmware_config.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/core/sha256.h"
#include "provisioner/net/http_client.h"
#include "tests/bmc/bmc_test_util.h"

namespace kiln::firmware::test {

std::string write_fleet(const kiln::test::TempDir& dir, const FleetSpec& spec) {
    setenv("KILN_FW_TEST_PASSWORD", kBmcPassword, 1);
    dir.write("pipelines/fw.toml",
              "schema = 1\nname = \"fw\"\ndescription = \"firmware only\"\nstages = [\"firmware\"]\n");
    std::string t = "schema = 1\n[fleet]\nname = \"fwtest\"\n[limits]\nparallel = 8\nretries = 0\n";
    t += "[[racks]]\nname = \"r1\"\n";
    t += spec.firmware_toml + "\n" + spec.bios_toml + "\n" + spec.extra_toml + "\n";
    t += "[defaults]\nrole = \"fw\"\n";
    if (spec.firmware_toml.find("[firmware.p]") != std::string::npos) t += "firmware = \"p\"\n";
    if (spec.bios_toml.find("[bios.b]") != std::string::npos) t += "bios = \"b\"\n";
    if (spec.extra_toml.find("[host_os.os]") != std::string::npos) t += "host_os = \"os\"\n";
    t += "bmc = { username = \"admin\", password = \"env:KILN_FW_TEST_PASSWORD\" }\n";
    for (size_t i = 0; i < spec.bmc_urls.size(); ++i) {
        const std::string system = i < spec.bmc_systems.size() && !spec.bmc_systems[i].empty()
                                       ? fmt::format(", system = \"{}\"", spec.bmc_systems[i])
                                       : "";
        t += fmt::format("[[nodes]]\nname = \"node-{}\"\nrack = \"r1\"\nbmc = {{ url = \"{}\"{} }}\n", i,
                         spec.bmc_urls[i], system);
    }
    return dir.write("fleet.toml", t);
}

config::Fleet load_fleet_or_fail(const std::string& path) {
    config::LoadOptions opts;
    opts.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
    opts.tables = firmware::firmware_tables();
    auto r = config::load_fleet(path, opts);
    for (const auto& e : r.errors) UNSCOPED_INFO(e.str());
    REQUIRE(r.fleet.has_value());
    return std::move(*r.fleet);
}

StageRunResult run_stage(engine::Stage& stage, const config::Fleet& fleet, const config::Node& node) {
    StageRunResult out;
    engine::StopToken stop;
    engine::StageContext ctx(
        fleet, node, stage.name(), stop, engine::StageContext::Clock::now() + std::chrono::minutes(5),
        [&](const std::string& m, int) { out.progress.push_back(m); },
        [&](const std::string& k, const std::string& m) { out.events.push_back(k + ": " + m); });
    auto obs = stage.observe(ctx);
    if (!obs) {
        out.error = obs.error();
        return out;
    }
    auto plan = stage.plan(ctx, *obs);
    if (!plan) {
        out.error = plan.error();
        return out;
    }
    for (const auto& a : *plan) {
        out.actions.push_back(a.id);
        if (auto s = stage.apply(ctx, a); !s) {
            out.error = s.error();
            return out;
        }
    }
    if (auto v = stage.verify(ctx); !v) out.error = v.error();
    return out;
}

kiln::CommandResult run_kiln(std::vector<std::string> args) {
    args.insert(args.begin(), KILN_BINARY);
    kiln::CommandSpec spec;
    spec.argv = std::move(args);
    spec.env = {{"KILN_FW_TEST_PASSWORD", kBmcPassword}};
    spec.timeout = std::chrono::seconds(120);
    auto r = kiln::ProcessRunner().run(spec);
    REQUIRE(r);
    return *r;
}

nlohmann::json bmc_get(const std::string& url, const std::string& path) {
    net::CurlHttpClient http;
    net::HttpRequest req;
    req.url = url + path;
    req.headers.emplace_back("Authorization", kiln::bmc::test::basic_auth("admin", kBmcPassword));
    auto r = http.send(req);
    REQUIRE(r);
    INFO("GET " << path << ": " << r->body);
    REQUIRE(r->status == 200);
    return nlohmann::json::parse(r->body);
}

std::string gpu_tree(const kiln::test::TempDir& dir, int at_new) {
    std::string tree = dir.file("gpu-tree");
    std::filesystem::copy(kiln::bmc::test::mockup_path("dmtf-public-rackmount1"), tree,
                          std::filesystem::copy_options::recursive);
    const std::string inv_dir = tree + "/UpdateService/FirmwareInventory";
    nlohmann::json coll = nlohmann::json::parse(std::ifstream(inv_dir + "/index.json"));
    for (int i = 1; i <= 8; ++i) {
        const std::string id = "GPU_SXM_" + std::to_string(i);
        const std::string uri = "/redfish/v1/UpdateService/FirmwareInventory/" + id;
        nlohmann::json member = {{"@odata.type", "#SoftwareInventory.v1_9_0.SoftwareInventory"},
                                 {"@odata.id", uri},
                                 {"Id", id},
                                 {"Name", "GPU SXM Firmware"},
                                 {"Updateable", true},
                                 {"Version", i <= at_new ? "92.00.20.00.01" : "92.00.19.00.11"}};
        std::filesystem::create_directories(inv_dir + "/" + id);
        std::ofstream(inv_dir + "/" + id + "/index.json") << member.dump(2);
        coll["Members"].push_back({{"@odata.id", uri}});
    }
    coll["Members@odata.count"] = coll["Members"].size();
    std::ofstream(inv_dir + "/index.json") << coll.dump(2);
    return tree;
}

std::string gpu_component(const kiln::test::TempDir& dir, const std::string& name, const std::string& match) {
    std::string content = "KILN-FW GPU_SXM 92.00.20.00.01\n" + std::string(200000, 'g');
    std::string path = dir.write("artifacts/gpu.bin", content);
    std::string t = "[firmware.p]\n[[firmware.p.components]]\nname = \"" + name + "\"\nversion = \"92.00.20.00.01\"\n";
    if (!match.empty()) t += "match = \"" + match + "\"\n";
    return t + "artifact = \"" + path + "\"\nsha256 = \"" + sha256_hex(content) + "\"\n";
}

}  // namespace kiln::firmware::test
