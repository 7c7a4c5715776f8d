// A network namespace holding veth rdma0 <-> rdma1 (rdma0 up, MTU 1500),
// created for one test and deleted after it. Root needed.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "provisioner/core/command.h"

namespace kiln::test {

inline CommandResult run_argv(std::vector<std::string> argv) {
    ProcessRunner r;
    CommandSpec s;
    s.argv = std::move(argv);
    s.timeout = std::chrono::seconds(20);
    auto res = r.run(s);
    REQUIRE(res);
    return *res;
}

struct VethNetns {
    std::string ns;
    explicit VethNetns(const std::string& prefix) : ns(prefix + std::to_string(::getpid())) {
        run_argv({"ip", "netns", "del", ns});
        REQUIRE(run_argv({"ip", "netns", "add", ns}).success());
        REQUIRE(
            run_argv({"ip", "netns", "exec", ns, "ip", "link", "add", "rdma0", "type", "veth", "peer", "name", "rdma1"})
                .success());
        REQUIRE(run_argv({"ip", "netns", "exec", ns, "ip", "link", "set", "rdma0", "up"}).success());
    }
    ~VethNetns() { run_argv({"ip", "netns", "del", ns}); }
    VethNetns(const VethNetns&) = delete;
    VethNetns& operator=(const VethNetns&) = delete;

    int mtu(const std::string& dev) {
        auto r = run_argv({"ip", "netns", "exec", ns, "ip", "-j", "link", "show", "dev", dev});
        return nlohmann::json::parse(r.out)[0]["mtu"].get<int>();
    }
    void set_mtu(const std::string& dev, int mtu) {
        REQUIRE(run_argv({"ip", "netns", "exec", ns, "ip", "link", "set", "dev", dev, "mtu", std::to_string(mtu)})
                    .success());
    }
};

}  // namespace kiln::test
