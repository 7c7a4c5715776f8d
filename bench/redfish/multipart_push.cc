// bench/redfish part (c), kiln's side: one multipart push of an artifact to
// a MultipartHttpPushUri through kiln's HttpClient (provisioner/net, the
// UpdateFile part streamed from disk with file_path), as the firmware stage
// sends it. Prints {"status", "seconds", "bytes"} on one line; the driver
// multipart_bench.py times it against `curl -F` to the same kiln-bmc.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "provisioner/core/secret.h"
#include "provisioner/net/http_client.h"

int main(int argc, char** argv) {
    CLI::App app{"kiln-bench-multipart: push one artifact through kiln's HttpClient"};
    std::string url, user = "admin", password_env = "KILN_BMC_PASSWORD", file, target;
    app.add_option("--url", url, "the MultipartHttpPushUri, absolute")->required();
    app.add_option("--user", user, "BMC user (Basic auth)");
    app.add_option("--password-env", password_env, "variable holding the BMC password");
    app.add_option("--file", file, "the artifact")->required()->check(CLI::ExistingFile);
    app.add_option("--target", target, "a FirmwareInventory URI for UpdateParameters.Targets");
    CLI11_PARSE(app, argc, argv);

    auto secret = kiln::Secret::parse("env:" + password_env, ".");
    if (!secret) {
        std::cerr << secret.error().message << "\n";
        return 1;
    }
    auto password = secret->resolve();
    if (!password) {
        std::cerr << password.error().message << "\n";
        return 1;
    }
    nlohmann::json params = {{"@Redfish.OperationApplyTime", "Immediate"}};
    params["Targets"] = target.empty() ? nlohmann::json::array() : nlohmann::json::array({target});

    kiln::net::HttpRequest req;
    req.method = "POST";
    req.url = url;
    req.basic_user = user;
    req.basic_password = *password;
    req.timeout = std::chrono::minutes(5);
    req.multipart = {
        {"UpdateParameters", "application/json", params.dump(), "", ""},
        {"UpdateFile", "application/octet-stream", "", file, ""},
    };
    kiln::net::CurlHttpClient client;
    const auto start = std::chrono::steady_clock::now();
    auto resp = client.send(req);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!resp) {
        std::cerr << resp.error().str() << "\n";
        return 1;
    }
    std::cout << nlohmann::json{{"status", resp->status},
                                {"seconds", seconds},
                                {"bytes", std::filesystem::file_size(file)},
                                {"location", resp->header("Location")}}
                     .dump()
              << std::endl;
    return resp->status == 202 ? 0 : 2;
}
