#include "tests/firmware/firmware_fixture.h"

#include <cstdlib>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/net/http_client.h"
#include "tests/bmc/bmc_test_util.h"

namespace kiln::firmware::test {

std::string write_fleet(const kiln::test::TempDir& dir, const FleetSpec& spec) {
    setenv("KILN_FW_TEST_PASSWORD", kBmcPassword, 1);
    dir.write("pipelines/fw.toml", "schema = 1\nname = \"fw\"\ndescription = \"firmware only\"\nstages = [\"firmware\"]\n");
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

}  // namespace kiln::firmware::test
