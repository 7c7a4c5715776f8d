#include "pipelines/smoke/stage/guest_agent_transport.h"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "provisioner/core/base64.h"
#include "provisioner/core/json_limits.h"
#include "provisioner/vm/guest_contract.h"

namespace kiln::smoke {

namespace {

struct ConnCloser {
    void operator()(virConnectPtr c) const { virConnectClose(c); }
};
struct DomFreer {
    void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using Conn = std::unique_ptr<virConnect, ConnCloser>;
using Dom = std::unique_ptr<virDomain, DomFreer>;

std::string last_libvirt_error() {
    const virError* e = virGetLastError();
    return e && e->message ? e->message : "unknown libvirt error";
}

Result<Conn> open(const std::string& uri) {
    Conn c(virConnectOpen(uri.c_str()));
    if (!c) return make_error("smoke", "smoke.libvirt", "cannot connect to " + uri + ": " + last_libvirt_error(), true);
    return c;
}

// One agent command; the reply's "return" member.
Result<nlohmann::json> agent(virDomainPtr dom, const std::string& command, int timeout_s) {
    char* reply = virDomainQemuAgentCommand(dom, command.c_str(), timeout_s, 0);
    if (!reply) return make_error("smoke", "smoke.agent", std::string("guest agent: ") + last_libvirt_error(), true);
    std::string text(reply);
    std::free(reply);
    // guest-exec-status carries the command's output base64'd: room for it.
    auto j = parse_json_limited(text, "guest agent reply", {64u << 20, 32, 1'000'000}, "smoke");
    if (!j || !j->is_object() || !j->contains("return"))
        return make_error("smoke", "smoke.agent",
                          "guest agent: unexpected reply" + (j ? std::string() : " (" + j.error().message + ")"), true);
    return (*j)["return"];
}

}  // namespace

std::string guest_exec_command(const std::string& path, const std::vector<std::string>& args) {
    return nlohmann::json{{"execute", "guest-exec"},
                          {"arguments", {{"path", path}, {"arg", args}, {"capture-output", true}}}}
        .dump();
}

GuestAgentTransport::GuestAgentTransport(GuestAgentOptions options) : options_(std::move(options)) {
    if (options_.smoke_path.empty()) options_.smoke_path = vm::kGuestSmokePath;
    if (options_.port_base == 0) options_.port_base = vm::kSmokeHostPortBase;
}

Result<std::vector<std::string>> GuestAgentTransport::list_vms(const config::Node& node_config) {
    const std::string& node = node_config.name;
    auto conn = open(node_config.libvirt_uri.empty() ? options_.uri : node_config.libvirt_uri);
    if (!conn) return conn.error();
    virDomainPtr* doms = nullptr;
    int n = virConnectListAllDomains(conn->get(), &doms, 0);
    if (n < 0) return make_error("smoke", "smoke.libvirt", "list domains: " + last_libvirt_error(), true);
    std::vector<std::pair<int, std::string>> found;
    const std::string prefix = "kiln-" + node + "-vm";
    for (int i = 0; i < n; ++i) {
        const char* name = virDomainGetName(doms[i]);
        std::string s = name ? name : "";
        if (s.rfind(prefix, 0) == 0) {
            std::string idx = s.substr(prefix.size());
            if (!idx.empty() && std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                s == vm::domain_name(node, std::stoi(idx)))
                found.emplace_back(std::stoi(idx), s);
        }
        virDomainFree(doms[i]);
    }
    std::free(doms);
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    for (auto& [i, s] : found) out.push_back(s);
    return out;
}

RankAddress GuestAgentTransport::address(int ordinal) const {
    return {"10.0.2.2", options_.port_base + ordinal, "0.0.0.0", vm::kGuestSmokePort};
}

Result<std::vector<RankOutput>> GuestAgentTransport::run(const config::Node& node, const std::vector<RankLaunch>& ranks,
                                                         std::chrono::milliseconds timeout) {
    auto conn = open(node.libvirt_uri.empty() ? options_.uri : node.libvirt_uri);
    if (!conn) return conn.error();
    std::vector<Dom> doms;
    std::vector<int64_t> pids;
    for (const auto& r : ranks) {
        Dom d(virDomainLookupByName(conn->get(), r.vm.c_str()));
        if (!d) return make_error("smoke", "smoke.vm", "no domain " + r.vm + ": " + last_libvirt_error());
        auto started = agent(d.get(), guest_exec_command(options_.smoke_path, r.args), options_.agent_timeout_s);
        if (!started)
            return make_error("smoke", "smoke.start", r.vm + ": guest-exec: " + started.error().message, true);
        pids.push_back(started->value("pid", int64_t(-1)));
        doms.push_back(std::move(d));
    }
    std::vector<RankOutput> out(ranks.size());
    std::vector<bool> done(ranks.size(), false);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t remaining = ranks.size();
    while (remaining > 0) {
        for (size_t i = 0; i < ranks.size(); ++i) {
            if (done[i]) continue;
            out[i].vm = ranks[i].vm;
            const std::string cmd =
                nlohmann::json{{"execute", "guest-exec-status"}, {"arguments", {{"pid", pids[i]}}}}.dump();
            auto st = agent(doms[i].get(), cmd, options_.agent_timeout_s);
            if (!st) continue;  // the agent may be busy: ask again until the deadline
            if (!st->value("exited", false)) continue;
            out[i].exit_code = st->value("exitcode", -1);
            out[i].out = base64_decode(st->value("out-data", "")).value_or("");
            out[i].err = base64_decode(st->value("err-data", "")).value_or("");
            done[i] = true;
            --remaining;
        }
        if (remaining == 0) break;
        if (std::chrono::steady_clock::now() >= deadline) {
            for (size_t i = 0; i < ranks.size(); ++i)
                if (!done[i]) out[i].timed_out = true;
            break;
        }
        std::this_thread::sleep_for(options_.poll_interval);
    }
    return out;
}

}  // namespace kiln::smoke
