// kiln-bench-redfish-walk: the firmware stage's inventory walk (bmc_inventory.h)
// against one BMC, repeated; prints {"seconds", "walks", "requests",
// "components"} for bench/redfish/run.sh to set beside sushy's same walk.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "firmware/redfish/session_pool.h"
#include "firmware/stage/bmc_inventory.h"

int main(int argc, char** argv) {
    CLI::App app{"kiln's Redfish inventory walk, timed"};
    std::string url, user = "admin", password_env = "KILN_BMC_PASSWORD";
    int iterations = 20;
    kiln::firmware::InventoryOptions options;
    app.add_option("--url", url, "BMC base URL")->required();
    app.add_option("--system", options.system_uri, "the node's system on a BMC with several (default: the first)");
    app.add_option("--user", user, "BMC user");
    app.add_option("--password-env", password_env, "environment variable with the password");
    app.add_option("--iterations", iterations, "walks to time");
    CLI11_PARSE(app, argc, argv);
    const char* pw = std::getenv(password_env.c_str());
    if (!pw) {
        std::fprintf(stderr, "set %s\n", password_env.c_str());
        return 1;
    }
    kiln::net::CurlHttpClient http;
    kiln::redfish::SessionPool pool(http);
    auto session = pool.acquire({url, user, pw, {}});
    kiln::redfish::Client client(session);
    auto warm = kiln::firmware::read_inventory(client, options);  // login, connection
    if (!warm) {
        std::fprintf(stderr, "%s\n", warm.error().str().c_str());
        return 1;
    }
    int before = session->stats().requests;
    auto start = std::chrono::steady_clock::now();
    size_t components = 0;
    for (int i = 0; i < iterations; ++i) {
        auto inv = kiln::firmware::read_inventory(client, options);
        if (!inv) {
            std::fprintf(stderr, "%s\n", inv.error().str().c_str());
            return 1;
        }
        components = inv->components.size();
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s\n", nlohmann::json{{"seconds", seconds},
                                       {"walks", iterations},
                                       {"requests", session->stats().requests - before},
                                       {"components", components}}
                            .dump()
                            .c_str());
    return 0;
}
