// A scripted BMC behind the HttpClient interface: each (method, path) has a
// queue of replies (the last one repeats), and every request is recorded.
// For what a real emulator cannot easily be made to do: malformed and huge
// bodies, wrong types, redirects to other hosts, tasks in every state.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/net/http_client.h"

namespace kiln::firmware::test {

struct Reply {
    long status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string transport_error;  // "http.connect" etc.: the send fails instead
};

Reply json_reply(const nlohmann::json& body, long status = 200,
                 std::vector<std::pair<std::string, std::string>> headers = {});

class FakeBmc : public net::HttpClient {
public:
    // Routes are keyed "METHOD /path" (path without origin).
    void on(const std::string& method, const std::string& path, std::vector<Reply> replies);
    void on(const std::string& method, const std::string& path, Reply reply) {
        on(method, path, std::vector<Reply>{std::move(reply)});
    }
    Result<net::HttpResponse> send(const net::HttpRequest& request) override;
    // Called with every request (and its path) before it is routed: lets a
    // test change the BMC's state when an action arrives.
    std::function<void(const net::HttpRequest&, const std::string& path)> hook;

    std::vector<net::HttpRequest> requests() const;
    // Path -> body of the reply each GET route answers now (for serving the
    // same tree over real HTTP, e.g. to a `kiln` child process).
    std::map<std::string, std::string> get_bodies() const;
    int count(const std::string& method, const std::string& path) const;

    // A small DSP0266 tree: root with sessions, one system, a manager,
    // UpdateService with SimpleUpdate and a FirmwareInventory of BIOS/BMC.
    void minimal_tree(const std::string& bios_version = "1.0", const std::string& bmc_version = "1.0");

private:
    mutable std::mutex mu_;
    std::map<std::string, std::deque<Reply>> routes_;
    std::vector<net::HttpRequest> seen_;
};

}  // namespace kiln::firmware::test
