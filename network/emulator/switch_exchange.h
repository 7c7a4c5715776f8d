// One HTTP request to an emulated switch and its answer, free of the server
// library: the services handle these, switch_server.cc converts to and from
// libmicrohttpd, and the in-process tests build them by hand.
#pragma once

#include <map>
#include <string>

namespace kiln::network::emulator {

struct SwitchRequest {
    std::string method;
    std::string path;                          // percent-decoded, no query
    std::map<std::string, std::string> query;  // decoded values
    std::string authorization;                 // the Authorization header as sent
    std::string body;

    std::string arg(const std::string& name) const {
        auto it = query.find(name);
        return it == query.end() ? std::string() : it->second;
    }
};

struct SwitchResponse {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
};

}  // namespace kiln::network::emulator
