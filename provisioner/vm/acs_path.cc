#include "provisioner/vm/acs_path.h"

#include <cstdio>
#include <map>

#include "provisioner/vm/gdr_path.h"

namespace kiln::vm {

namespace {

const char* const kAcsCtrlRegister = "ECAP_ACS+6.w";

std::string hex4(unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%04x", v);
    return buf;
}

std::string first_line(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const size_t e = s.find_first_of("\r\n", b);
    return s.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

// setpci not on the host: the runner could not start it, or a remote shell said so.
bool tool_missing(const Result<CommandResult>& r) {
    if (!r) return true;
    return r->exit_code == 127 || r->err.find("command not found") != std::string::npos;
}

std::string failure(const CommandResult& r) {
    if (r.timed_out) return "timed out";
    const std::string line = first_line(r.err.empty() ? r.out : r.err);
    return line.empty() ? "exit " + std::to_string(r.exit_code) : line;
}

Error missing_setpci() {
    return make_error("vm", "vm.setpci_missing",
                      "setpci is not installed on the host (install pciutils): kiln needs it to turn ACS P2P "
                      "redirect off on the GPUDirect paths");
}

// "001d" (what setpci prints for a .w register) -> 0x001d.
std::optional<uint16_t> parse_word(const std::string& text) {
    const std::string t = first_line(text);
    if (t.empty() || t.size() > 4) return std::nullopt;
    unsigned v = 0;
    for (char c : t) {
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= static_cast<unsigned>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= static_cast<unsigned>(c - 'A' + 10);
        else
            return std::nullopt;
    }
    return static_cast<uint16_t>(v);
}

}  // namespace

std::string AcsChange::text() const {
    return port + " ACSCtl " + hex4(from) + " -> " + hex4(to);
}

std::vector<std::string> acs_write_argv(const std::string& port) {
    char value[32];
    std::snprintf(value, sizeof value, "%s=%04x:%04x", kAcsCtrlRegister, 0u, static_cast<unsigned>(kAcsP2pRedirect));
    return {"setpci", "-s", port, value};
}

std::vector<AcsPort> acs_path_ports(const HostTopology& host, const std::vector<std::string>& gpus) {
    std::map<std::string, std::vector<std::string>> by_port;
    for (const auto& addr : gpus) {
        const Gpu* g = host.gpu(addr);
        if (!g) continue;
        for (const auto& nic : g->nics) {
            const GdrPath path = gdr_path(host, addr, nic);
            for (const auto& port : path.ports) {
                const PciDevice* d = host.device(port);
                // Read in full and no ACS capability: nothing there redirects.
                if (d && d->config && d->config->extended && !d->config->acs_ctrl) continue;
                by_port[port].push_back(addr + " <-> " + nic);
            }
        }
    }
    std::vector<AcsPort> out;
    for (auto& [port, pairs] : by_port) out.push_back({port, std::move(pairs)});
    return out;
}

Result<uint16_t> read_acs_ctrl(CommandRunner& runner, const std::string& port, std::chrono::milliseconds timeout) {
    CommandSpec spec;
    spec.argv = {"setpci", "-s", port, kAcsCtrlRegister};
    spec.timeout = timeout;
    spec.max_output = 64u << 10;
    auto r = runner.run(spec);
    if (tool_missing(r)) return missing_setpci();
    if (!r->success())
        return make_error("vm", "vm.acs_unreadable",
                          "cannot read ACS control of " + port + " (setpci: " + failure(*r) + ")", r->timed_out);
    auto v = parse_word(r->out);
    if (!v)
        return make_error("vm", "vm.acs_unreadable",
                          "cannot read ACS control of " + port + ": setpci printed \"" + first_line(r->out) + "\"");
    return *v;
}

Result<std::vector<AcsChange>> plan_acs(CommandRunner& runner, const std::vector<AcsPort>& ports,
                                        std::chrono::milliseconds timeout) {
    std::vector<AcsChange> out;
    for (const auto& p : ports) {
        auto ctrl = read_acs_ctrl(runner, p.port, timeout);
        if (!ctrl) return ctrl.error();
        if (acs_wanted(*ctrl) != *ctrl) out.push_back({p.port, *ctrl, acs_wanted(*ctrl)});
    }
    return out;
}

Result<std::vector<AcsChange>> apply_acs(CommandRunner& runner, const std::vector<AcsPort>& ports,
                                         std::chrono::milliseconds timeout) {
    auto changes = plan_acs(runner, ports, timeout);
    if (!changes) return changes.error();
    for (const auto& c : *changes) {
        CommandSpec spec;
        spec.argv = acs_write_argv(c.port);
        spec.timeout = timeout;
        spec.max_output = 64u << 10;
        auto r = runner.run(spec);
        if (tool_missing(r)) return missing_setpci();
        if (!r->success())
            return make_error("vm", "vm.acs_write_failed", describe_argv(spec.argv) + " failed: " + failure(*r),
                              r->timed_out);
        auto back = read_acs_ctrl(runner, c.port, timeout);
        if (!back) return back.error();
        if (*back & kAcsP2pRedirect)
            return make_error("vm", "vm.acs_not_applied",
                              c.port + " ACSCtl wanted " + hex4(c.to) + ", read " + hex4(*back) +
                                  " after the write (P2P redirect still on)");
    }
    return changes;
}

}  // namespace kiln::vm
