#include "tests/firmware/fake_bmc.h"

#include "provisioner/net/url.h"

namespace kiln::firmware::test {

using nlohmann::json;

Reply json_reply(const json& body, long status, std::vector<std::pair<std::string, std::string>> headers) {
    headers.emplace_back("Content-Type", "application/json");
    return Reply{status, body.dump(), std::move(headers), ""};
}

void FakeBmc::on(const std::string& method, const std::string& path, std::vector<Reply> replies) {
    std::lock_guard<std::mutex> lock(mu_);
    routes_[method + " " + path] = std::deque<Reply>(replies.begin(), replies.end());
}

Result<net::HttpResponse> FakeBmc::send(const net::HttpRequest& request) {
    auto parts = net::split_url(request.url);
    std::string path = parts ? parts->target : request.url;
    if (hook) hook(request, path);
    Reply reply;
    {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(request);
        auto it = routes_.find(request.method + " " + path);
        if (it == routes_.end() || it->second.empty()) {
            reply = json_reply({{"error", {{"code", "Base.1.0.ResourceMissingAtURI"}}}}, 404);
        } else {
            reply = it->second.front();
            if (it->second.size() > 1) it->second.pop_front();
        }
    }
    if (!reply.transport_error.empty())
        return make_error("http", reply.transport_error, request.method + " " + path + ": scripted failure", true);
    if (reply.body.size() > request.max_response)
        return make_error("http", "http.too_large", request.method + " " + path + ": response over the limit");
    net::HttpResponse r;
    r.status = reply.status;
    r.body = reply.body;
    r.headers = reply.headers;
    return r;
}

std::vector<net::HttpRequest> FakeBmc::requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
}

std::map<std::string, std::string> FakeBmc::get_bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::string> out;
    for (const auto& [key, replies] : routes_)
        if (key.rfind("GET ", 0) == 0 && !replies.empty()) out[key.substr(4)] = replies.front().body;
    return out;
}

int FakeBmc::count(const std::string& method, const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& r : seen_) {
        auto parts = net::split_url(r.url);
        if (r.method == method && parts && parts->target == path) ++n;
    }
    return n;
}

void FakeBmc::minimal_tree(const std::string& bios_version, const std::string& bmc_version) {
    on("GET", "/redfish/v1/",
       json_reply({{"@odata.id", "/redfish/v1"},
                   {"Systems", {{"@odata.id", "/redfish/v1/Systems"}}},
                   {"Managers", {{"@odata.id", "/redfish/v1/Managers"}}},
                   {"UpdateService", {{"@odata.id", "/redfish/v1/UpdateService"}}},
                   {"Links", {{"Sessions", {{"@odata.id", "/redfish/v1/SessionService/Sessions"}}}}}}));
    on("POST", "/redfish/v1/SessionService/Sessions",
       json_reply({{"@odata.id", "/redfish/v1/SessionService/Sessions/1"}}, 201,
                  {{"X-Auth-Token", "tok-secret-1"}, {"Location", "/redfish/v1/SessionService/Sessions/1"}}));
    on("DELETE", "/redfish/v1/SessionService/Sessions/1", Reply{204, "", {}, ""});
    on("GET", "/redfish/v1/Systems", json_reply({{"Members", {{{"@odata.id", "/redfish/v1/Systems/S1"}}}}}));
    on("GET", "/redfish/v1/Systems/S1",
       json_reply({{"@odata.id", "/redfish/v1/Systems/S1"},
                   {"BiosVersion", bios_version},
                   {"PowerState", "On"},
                   {"Actions",
                    {{"#ComputerSystem.Reset",
                      {{"target", "/redfish/v1/Systems/S1/Actions/ComputerSystem.Reset"},
                       {"ResetType@Redfish.AllowableValues", {"On", "ForceRestart"}}}}}}}));
    on("GET", "/redfish/v1/Managers", json_reply({{"Members", {{{"@odata.id", "/redfish/v1/Managers/M1"}}}}}));
    on("GET", "/redfish/v1/Managers/M1", json_reply({{"FirmwareVersion", bmc_version}, {"Model", "Generic"}}));
    on("GET", "/redfish/v1/UpdateService",
       json_reply({{"FirmwareInventory", {{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory"}}},
                   {"Actions",
                    {{"#UpdateService.SimpleUpdate",
                      {{"target", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"}}}}}}));
    on("GET", "/redfish/v1/UpdateService/FirmwareInventory",
       json_reply({{"Members",
                    {{{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory/BIOS"}},
                     {{"@odata.id", "/redfish/v1/UpdateService/FirmwareInventory/BMC"}}}}}));
    on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BIOS",
       json_reply({{"Id", "BIOS"}, {"Name", "System BIOS"}, {"Version", bios_version}}));
    on("GET", "/redfish/v1/UpdateService/FirmwareInventory/BMC",
       json_reply({{"Id", "BMC"}, {"Name", "BMC Firmware"}, {"Version", bmc_version}}));
}

}  // namespace kiln::firmware::test
