#include "network/host/nic_firmware.h"

#include "network/host/text.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::network::host {

namespace {

std::vector<std::string> words(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// "True(1)" -> "1", "ETH(2)" -> "2", "8" -> "8".
std::string number_of(const std::string& v) {
    const size_t open = v.find('(');
    const size_t close = v.find(')', open == std::string::npos ? 0 : open);
    if (open == std::string::npos || close == std::string::npos) return v;
    return v.substr(open + 1, close - open - 1);
}

// The tool is not on the host: the runner could not start it, or the remote shell said so.
bool tool_missing(const Result<CommandResult>& r) {
    if (!r) return true;
    return r->exit_code == 127 || r->err.find("exec of") != std::string::npos ||
           r->err.find("command not found") != std::string::npos;
}

std::string nic_label(const FirmwareNic& n, const std::string& pci) {
    return n.nic == n.ifname ? fmt::format("{} ({})", n.nic, pci) : fmt::format("{} ({}, {})", n.nic, n.ifname, pci);
}

}  // namespace

int firmware_port(const std::string& pci) {
    const size_t dot = pci.rfind('.');
    if (dot == std::string::npos || dot + 2 != pci.size() || !std::isdigit(static_cast<unsigned char>(pci[dot + 1])))
        return 1;
    return pci[dot + 1] - '0' + 1;
}

int nic_port(CommandRunner& runner, const std::string& sysfs, const std::string& ifname, const std::string& pci,
             std::chrono::milliseconds timeout) {
    auto read = [&](const char* file) -> std::string {
        CommandSpec spec;
        spec.argv = {"cat", fmt::format("{}/class/net/{}/{}", sysfs, ifname, file)};
        spec.timeout = timeout;
        spec.max_output = 4u << 10;
        auto r = runner.run(spec);
        return r && r->success() ? trim(r->out) : "";
    };
    auto number = [](const std::string& t) -> int {
        if (t.empty() || t.size() > 3 ||
            !std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
            return -1;
        return std::stoi(t);
    };
    // "p1", or "p1s0" for a split port.
    const std::string name = read("phys_port_name");
    if (name.size() >= 2 && name[0] == 'p') {
        const size_t end = name.find_first_not_of("0123456789", 1);
        if (const int n = number(name.substr(1, end == std::string::npos ? std::string::npos : end - 1)); n >= 0)
            return n + 1;
    }
    if (const int n = number(read("dev_port")); n > 0) return n + 1;
    return firmware_port(pci);
}

std::vector<FirmwareSetting> firmware_settings(const FirmwareWanted& f, int port_number) {
    std::vector<FirmwareSetting> out = {{"SRIOV_EN", f.sriov_en ? "1" : "0"},
                                        {"NUM_OF_VFS", std::to_string(f.num_of_vfs)},
                                        {"ATS_ENABLED", f.ats_enabled ? "1" : "0"}};
    if (f.max_acc_out_read) out.push_back({"MAX_ACC_OUT_READ", std::to_string(*f.max_acc_out_read), true});
    const std::string port = fmt::format("_P{}", port_number);
    if (f.roce_cc_prio_mask) out.push_back({"ROCE_CC_PRIO_MASK" + port, std::to_string(*f.roce_cc_prio_mask), true});
    if (f.cnp_dscp) out.push_back({"CNP_DSCP" + port, std::to_string(*f.cnp_dscp), true});
    if (f.cnp_802p_prio) out.push_back({"CNP_802P_PRIO" + port, std::to_string(*f.cnp_802p_prio), true});
    return out;
}

std::string firmware_value_text(const std::string& key, const std::string& value) {
    if (key != "SRIOV_EN" && key != "ATS_ENABLED") return value.empty() ? "?" : value;
    if (value == "1") return "True";
    if (value == "0") return "False";
    return value.empty() ? "?" : value;
}

std::map<std::string, FirmwareValue> parse_mlxconfig_query(const std::string& out,
                                                           const std::vector<std::string>& keys) {
    // Configurations:        Next Boot                      (plain query)
    // Configurations:        Default    Current    Next Boot (with -e; '*' marks a changed key)
    std::map<std::string, FirmwareValue> found;
    bool has_current = false;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        auto w = words(line);
        if (w.empty()) continue;
        if (w[0] == "Configurations:") {
            has_current = line.find("Current") != std::string::npos;
            continue;
        }
        if (w[0] == "*") w.erase(w.begin());
        if (w.size() < 2 || std::find(keys.begin(), keys.end(), w[0]) == keys.end()) continue;
        FirmwareValue v;
        v.next_boot = number_of(w.back());
        if (has_current && w.size() >= 4) v.current = number_of(w[w.size() - 2]);
        found[w[0]] = v;
    }
    return found;
}

Result<std::string> nic_pci_address(CommandRunner& runner, const std::string& sysfs, const std::string& ifname,
                                    std::chrono::milliseconds timeout) {
    CommandSpec spec;
    spec.argv = {"readlink", "-e", fmt::format("{}/class/net/{}/device", sysfs, ifname)};
    spec.timeout = timeout;
    spec.max_output = 64u << 10;
    auto r = runner.run(spec);
    const std::string path = r && r->success() ? trim(r->out) : "";
    if (path.find("/devices/pci") == std::string::npos)
        return make_error("network", "network.not_pci", fmt::format("{} is not a PCI device", ifname));
    return path.substr(path.rfind('/') + 1);
}

Result<std::map<std::string, FirmwareValue>> query_nic_firmware(CommandRunner& runner, const std::string& pci,
                                                                const std::vector<FirmwareSetting>& settings,
                                                                std::chrono::milliseconds timeout) {
    CommandSpec spec;
    spec.argv = {"mlxconfig", "-e", "-d", pci, "query"};
    std::vector<std::string> keys;
    for (const auto& s : settings) keys.push_back(s.key);
    spec.timeout = timeout;
    spec.max_output = 1u << 20;
    auto q = runner.run(spec);
    if (tool_missing(q))
        return make_error("network", "network.mlxconfig_missing",
                          "mlxconfig is not installed on the host (install mstflint, or NVIDIA's MFT)");
    if (!q->success())
        return make_error("network", "network.mlxconfig_failed",
                          fmt::format("mlxconfig cannot query {}: {}", pci,
                                      q->timed_out ? "timed out" : first_line(q->err.empty() ? q->out : q->err)),
                          q->timed_out);
    return parse_mlxconfig_query(q->out, keys);
}

Result<FirmwareApplyReport> apply_nic_firmware(CommandRunner& runner, const std::vector<FirmwareNic>& nics,
                                               const FirmwareApplyOptions& o) {
    struct NicWork {
        const FirmwareNic* nic;
        std::string pci;
        std::string label;
        std::vector<FirmwareSetting> settings;  // those asked that the firmware has
        std::vector<FirmwareSetting> to_set;
        std::map<std::string, FirmwareValue> before;
    };
    auto progress = [&](const std::string& m) {
        if (o.reboot.progress) o.reboot.progress(m);
    };
    FirmwareApplyReport report;
    std::vector<NicWork> work;
    bool reboot = false;
    for (const auto& n : nics) {
        NicWork w{&n};
        auto pci = nic_pci_address(runner, o.sysfs, n.ifname, o.command_timeout);
        if (!pci) return make_error("network", pci.error().code, fmt::format("{}: {}", n.nic, pci.error().message));
        w.pci = *pci;
        w.label = nic_label(n, w.pci);
        const auto asked = firmware_settings(n.want, nic_port(runner, o.sysfs, n.ifname, w.pci, o.command_timeout));
        auto q = query_nic_firmware(runner, w.pci, asked, o.command_timeout);
        if (!q) return make_error("network", q.error().code, w.label + ": " + q.error().message, q.error().transient);
        w.before = *q;
        for (const auto& s : asked) {
            auto v = w.before.find(s.key);
            if (v == w.before.end() && s.optional) continue;  // a RoCE key this firmware lacks: observe says so
            if (v == w.before.end())
                return make_error(
                    "network", "network.firmware_key_missing",
                    fmt::format("{}: mlxconfig shows no {} (the NIC's firmware lacks it)", w.label, s.key));
            w.settings.push_back(s);
            if (v->second.next_boot != s.wanted) w.to_set.push_back(s);
            if (v->second.next_boot != s.wanted || v->second.running() != s.wanted) reboot = true;
        }
        work.push_back(std::move(w));
    }

    for (auto& w : work) {
        if (w.to_set.empty()) continue;
        CommandSpec spec;
        spec.argv = {"mlxconfig", "-d", w.pci, "-y", "set"};
        std::vector<std::string> changes;
        for (const auto& s : w.to_set) {
            spec.argv.push_back(s.key + "=" + s.wanted);
            changes.push_back(fmt::format("{} {}->{}", s.key, firmware_value_text(s.key, w.before[s.key].next_boot),
                                          firmware_value_text(s.key, s.wanted)));
        }
        spec.timeout = o.command_timeout;
        spec.max_output = 1u << 20;
        progress(fmt::format("{}: {}", w.label, describe_argv(spec.argv)));
        auto r = runner.run(spec);
        if (!r || !r->success())
            return make_error("network", "network.mlxconfig_set_failed",
                              fmt::format("{}: {} failed: {}", w.label, describe_argv(spec.argv),
                                          !r             ? r.error().message
                                          : r->timed_out ? std::string("timed out")
                                                         : first_line(r->err.empty() ? r->out : r->err)));
        // The set is stored for the next boot: check it took before rebooting for it.
        auto q = query_nic_firmware(runner, w.pci, w.settings, o.command_timeout);
        if (!q) return make_error("network", q.error().code, w.label + ": " + q.error().message, q.error().transient);
        for (const auto& s : w.to_set)
            if ((*q)[s.key].next_boot != s.wanted)
                return make_error("network", "network.mlxconfig_set_failed",
                                  fmt::format("{}: {} reads {} for the next boot after mlxconfig set, wanted {}",
                                              w.label, s.key, (*q)[s.key].next_boot, s.wanted));
        report.set.push_back(fmt::format("{} {}", w.nic->nic, fmt::join(changes, ", ")));
    }
    if (!reboot) return report;

    auto back = reboot_and_wait(runner, o.reboot);
    if (!back) return back.error();
    report.rebooted = true;

    std::vector<std::string> wrong;
    for (const auto& w : work) {
        auto q = query_nic_firmware(runner, w.pci, w.settings, o.command_timeout);
        if (!q) return make_error("network", q.error().code, w.label + ": " + q.error().message, q.error().transient);
        for (const auto& s : w.settings) {
            auto v = q->find(s.key);
            const std::string read = v == q->end() ? "nothing" : v->second.running();
            if (read != s.wanted)
                wrong.push_back(fmt::format("{} {} wanted {}, read {}", w.label, s.key, s.wanted, read));
        }
    }
    if (!wrong.empty())
        return make_error("network", "network.firmware_not_applied",
                          fmt::format("after the host's reboot: {}", fmt::join(wrong, "; ")));
    progress("ConnectX firmware verified after the reboot");
    return report;
}

}  // namespace kiln::network::host
