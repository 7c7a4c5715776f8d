#include "firmware/stage/firmware_command.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "firmware/redfish/session_pool.h"
#include "firmware/stage/bmc_inventory.h"
#include "firmware/stage/firmware_stage.h"
#include "provisioner/core/secret.h"

namespace kiln::firmware {

using nlohmann::json;

void add_firmware_commands(CLI::App& command, FirmwareArgs& args) {
    command.require_subcommand(1);
    auto* inv = command.add_subcommand("inventory", "each node's firmware components and versions, read from its BMC");
    inv->add_option("FLEET", args.fleet, "fleet config (TOML); or use --bmc");
    inv->add_option("--node", args.nodes, "only this node (repeatable)");
    inv->add_option("--bmc", args.bmc_url, "one BMC's URL, without a fleet file");
    inv->add_option("--user", args.user, "BMC user name (with --bmc)");
    inv->add_option("--password-env", args.password_env, "environment variable holding the BMC password (with --bmc)");
    auto* ca =
        inv->add_option("--ca", args.ca, "PEM CA bundle to verify the BMC's certificate")->check(CLI::ExistingFile);
    auto* fp = inv->add_option("--fingerprint", args.fingerprint, "pinned SHA-256 of the BMC's certificate");
    auto* insecure = inv->add_flag("--insecure", args.insecure, "do not verify the BMC's certificate");
    ca->excludes(fp)->excludes(insecure);
    fp->excludes(insecure);
    inv->add_flag(
        "--json", args.json,
        R"(as {"nodes": [{"name", "vendor", "system", "components", "bios_version", "bmc_version", "warnings"}]})");
}

namespace {

struct Target {
    std::string name;
    Result<redfish::Endpoint> endpoint;
    std::string system;  // the node's system on a shared BMC ("" = the first)
};

json node_json(const std::string& name, const BmcInventory& inv) {
    json comps = json::array();
    for (const auto& c : inv.components) comps.push_back({{"id", c.id}, {"name", c.name}, {"version", c.version}});
    json warnings = json::array();
    for (const auto& w : inv.warnings) warnings.push_back({{"part", w.part}, {"message", w.message}});
    return {{"name", name},
            {"vendor", inv.vendor},
            {"system", inv.system_uri},
            {"components", comps},
            {"bios_version", inv.bios_version},
            {"bmc_version", inv.bmc_version},
            {"warnings", warnings}};
}

}  // namespace

int cmd_firmware(const FirmwareArgs& args, const FirmwareFleetLoader& load) {
    std::vector<Target> targets;
    if (!args.bmc_url.empty()) {
        if (!args.fleet.empty()) {
            std::fprintf(stderr, "kiln: firmware inventory: give a FLEET or --bmc, not both\n");
            return 1;
        }
        redfish::Endpoint ep;
        ep.url = args.bmc_url;
        ep.user = args.user;
        if (!args.password_env.empty()) {
            auto secret = Secret::parse("env:" + args.password_env, ".");
            if (!secret) {
                std::fprintf(stderr, "kiln: --password-env: %s\n", secret.error().message.c_str());
                return 1;
            }
            auto pw = secret->resolve();
            if (!pw) {
                std::fprintf(stderr, "kiln: --password-env: %s\n", pw.error().message.c_str());
                return 1;
            }
            ep.password = *pw;
        }
        ep.tls.verify = !args.insecure;
        ep.tls.ca_bundle = args.ca;
        ep.tls.pinned_sha256 = args.fingerprint;
        targets.push_back({args.bmc_url, ep});
    } else {
        if (args.fleet.empty()) {
            std::fprintf(stderr, "kiln: firmware inventory: give a FLEET or --bmc URL\n");
            return 1;
        }
        auto fleet = load(args.fleet);
        if (!fleet) return 1;
        for (const auto& want : args.nodes)
            if (!fleet->find_node(want)) {
                std::fprintf(stderr, "kiln: %s: no node '%s'\n", args.fleet.c_str(), want.c_str());
                return 1;
            }
        for (const auto& n : fleet->nodes) {
            if (!args.nodes.empty() && std::find(args.nodes.begin(), args.nodes.end(), n.name) == args.nodes.end())
                continue;
            if (n.bmc.url.empty()) continue;
            targets.push_back({n.name, bmc_endpoint(n), n.bmc.system});
        }
    }

    net::CurlHttpClient http;
    int rc = 0;
    json nodes = json::array();
    {
        redfish::SessionPool pool(http);
        for (auto& t : targets) {
            Result<BmcInventory> inv = t.endpoint ? [&]() -> Result<BmcInventory> {
                redfish::Client client(pool.acquire(*t.endpoint));
                return read_inventory(client, {.bios = false, .network_adapters = true, .system_uri = t.system});
            }()
                : Result<BmcInventory>(t.endpoint.error());
            if (!inv) {
                rc = 1;
                std::fprintf(stderr, "kiln: %s: %s\n", t.name.c_str(), inv.error().str().c_str());
                nodes.push_back({{"name", t.name}, {"error", inv.error().str()}, {"error_code", inv.error().code}});
                continue;
            }
            if (args.json) {
                nodes.push_back(node_json(t.name, *inv));
                continue;
            }
            std::printf("%s (%s): BIOS %s, BMC %s\n", t.name.c_str(), inv->vendor.c_str(),
                        inv->bios_version.empty() ? "-" : inv->bios_version.c_str(),
                        inv->bmc_version.empty() ? "-" : inv->bmc_version.c_str());
            for (const auto& c : inv->components)
                std::printf("  %-28s %-48s %s\n", c.id.c_str(), c.name.c_str(), c.version.c_str());
            // Parts that could not be read: the list above may lack what they hold.
            for (const auto& w : inv->warnings) std::printf("  ! not read: %s\n", w.str().c_str());
        }
    }  // sessions logged out here
    if (args.json) std::printf("%s\n", json{{"nodes", nodes}}.dump(2).c_str());
    return rc;
}

engine::StageCommandSpec firmware_command() {
    return engine::args_command<FirmwareArgs>(
        "firmware", "look at BMC-managed firmware over Redfish", add_firmware_commands,
        [](const FirmwareArgs& a, const engine::CommandEnv& env) { return cmd_firmware(a, env.load_fleet); });
}

}  // namespace kiln::firmware
