// A scripted GPU host with ConnectX NICs, for the firmware path no test
// machine has. Each NIC has a current and a next-boot value per firmware key;
// `mlxconfig -e -d PCI query` prints both (Default, Current, Next Boot
// columns, '*' on changed keys, as the tool does), `mlxconfig -d PCI -y set
// K=V` changes the next-boot value (a query naming no keys lists every key
// the NIC has, as the tool does), `cat .../class/net/IF/phys_port_name` and
// `dev_port` answer the NIC's port, and `systemctl reboot` drops the
// connection (exit 255, as ssh), changes the boot id and promotes next-boot
// values to current, except the keys a test marks as not sticking. The
// runtime side (ip, dcb, sysfs) answers as a converged mlx5 host.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "provisioner/core/command.h"

namespace kiln::test {

class ConnectXFakeHost : public CommandRunner {
public:
    struct Nic {
        std::string ifname;
        std::map<std::string, std::string> current;  // key -> "0", "8"
        std::map<std::string, std::string> next;
        std::set<std::string> not_sticking;  // keys a reboot leaves at their old current value
        std::string phys_port_name;          // "p1"; "" = the driver gives none (EOPNOTSUPP)
        std::string dev_port = "0";
    };

    // PCI address -> NIC.
    std::map<std::string, Nic> nics;
    bool has_mlxconfig = true;
    bool reboot_refused = false;  // systemctl reboot answers "Access denied" and nothing happens
    bool never_back = false;      // after the reboot the host never answers again
    int down_polls = 0;           // boot-id reads that fail (ssh exit 255) after each reboot
    std::string boot_id = "boot-1";

    std::vector<std::vector<std::string>> calls;
    std::vector<std::vector<std::string>> sets;  // mlxconfig ... set calls
    int reboots = 0;

    void add_nic(const std::string& pci, const std::string& ifname, const std::string& sriov_en, const std::string& vfs,
                 const std::string& ats) {
        Nic n;
        n.ifname = ifname;
        n.current = {{"SRIOV_EN", sriov_en}, {"NUM_OF_VFS", vfs}, {"ATS_ENABLED", ats}};
        // The RoCE congestion-control keys per port, at ConnectX's defaults.
        for (const char* port : {"_P1", "_P2"}) {
            n.current[std::string("ROCE_CC_PRIO_MASK") + port] = "255";
            n.current[std::string("CNP_DSCP") + port] = "48";
            n.current[std::string("CNP_802P_PRIO") + port] = "6";
        }
        n.next = n.current;
        nics[pci] = n;
    }

    Result<CommandResult> run(const CommandSpec& spec) override {
        calls.push_back(spec.argv);
        const auto& a = spec.argv;
        if (down_left_ > 0 || gone_) {
            if (down_left_ > 0) --down_left_;
            return fail(255, "ssh: connect to host 10.0.0.21 port 22: Connection refused\n");
        }
        const std::string last = a.back();
        if (a[0] == "ip" && a.size() == 2 && a[1] == "-V") return out("ip utility, iproute2-6.1.0\n");
        if (a[0] == "ip" && a.size() > 1 && a[1] == "-j") {
            const std::string ifname = a.back();
            return out(R"([{"ifname":")" + ifname + R"(","mtu":9000,"max_mtu":9978}])");
        }
        if (a[0] == "cat" && last == "/proc/sys/kernel/random/boot_id") return out(boot_id + "\n");
        if (a[0] == "cat" && last.ends_with("sriov_totalvfs")) return out("8\n");
        if (a[0] == "cat" && last.ends_with("sriov_numvfs")) return out("8\n");
        if (a[0] == "cat" && last.find("/ecn/") != std::string::npos) return out("1\n");
        if (a[0] == "dcb" && a[2] == "app") return out(R"({"dscp_prio":[[26,3],[48,6]]})");
        if (a[0] == "dcb" && a[2] == "pfc")
            return out(
                R"({"prio_pfc":{"0":false,"1":false,"2":false,"3":true,"4":false,"5":false,"6":false,"7":false}})");
        for (const char* file : {"/phys_port_name", "/dev_port"}) {
            if (a[0] != "cat" || !last.ends_with(file)) continue;
            for (const auto& [pci, n] : nics) {
                if (last.find("/net/" + n.ifname + "/") == std::string::npos) continue;
                const std::string& v = std::string(file) == "/dev_port" ? n.dev_port : n.phys_port_name;
                if (v.empty()) return fail(1, "cat: " + last + ": Operation not supported\n");
                return out(v + "\n");
            }
            return fail(1, "cat: " + last + ": No such file or directory\n");
        }
        if (a[0] == "readlink") {
            for (const auto& [pci, n] : nics)
                if (last.find("/net/" + n.ifname + "/device") != std::string::npos)
                    return out("/sys/devices/pci0000:3a/0000:3a:00.0/" + pci + "\n");
            return fail(1, "");
        }
        if (a[0] == "mlxconfig" && has_mlxconfig) return mlxconfig(a);
        if (a[0] == "systemctl" && a.size() == 2 && a[1] == "reboot") {
            if (reboot_refused) return fail(1, "Failed to reboot system via logind: Access denied\n");
            ++reboots;
            boot_id = "boot-" + std::to_string(reboots + 1);
            for (auto& [pci, n] : nics)
                for (const auto& [k, v] : n.next)
                    if (!n.not_sticking.count(k)) n.current[k] = v;
            down_left_ = down_polls;
            gone_ = never_back;
            return fail(255, "Connection to 10.0.0.21 closed by remote host.\n");
        }
        return fail(127, "bash: " + a[0] + ": command not found\n");
    }

private:
    static CommandResult out(std::string text) {
        CommandResult r;
        r.exit_code = 0;
        r.out = std::move(text);
        return r;
    }
    static CommandResult fail(int code, std::string err) {
        CommandResult r;
        r.exit_code = code;
        r.err = std::move(err);
        return r;
    }
    static std::string shown(const std::string& key, const std::string& v) {
        if (key == "SRIOV_EN" || key == "ATS_ENABLED") return v == "1" ? "True(1)" : "False(0)";
        return v;
    }

    Result<CommandResult> mlxconfig(const std::vector<std::string>& a) {
        // mlxconfig [-e] -d PCI query KEYS... | mlxconfig -d PCI -y set K=V...
        size_t i = 1;
        const bool verbose = a.size() > i && a[i] == "-e";
        if (verbose) ++i;
        if (a.size() < i + 3 || a[i] != "-d") return fail(1, "-E- bad arguments\n");
        auto it = nics.find(a[i + 1]);
        if (it == nics.end()) return fail(1, "-E- Failed to open device: " + a[i + 1] + "\n");
        Nic& n = it->second;
        i += 2;
        if (a[i] == "-y" && a.size() > i + 1 && a[i + 1] == "set") {
            sets.push_back(a);
            for (size_t k = i + 2; k < a.size(); ++k) {
                const auto eq = a[k].find('=');
                n.next[a[k].substr(0, eq)] = a[k].substr(eq + 1);
            }
            return out(
                "Apply new Configuration? (y/n) [n] : y\nApplying... Done!\n-I- Please reboot machine to load "
                "new configurations.\n");
        }
        if (a[i] != "query") return fail(1, "-E- bad command\n");
        std::string text = "\nDevice #1:\n----------\n\nDevice type:    ConnectX6\nDevice:         " + it->first +
                           "\n\nConfigurations:                              ";
        text += verbose ? "Default         Current         Next Boot\n" : "Next Boot\n";
        // No keys named: every key the device has, as the tool lists them.
        std::vector<std::string> keys(a.begin() + static_cast<std::ptrdiff_t>(i) + 1, a.end());
        if (keys.empty())
            for (const auto& [k, v] : n.next) keys.push_back(k);
        for (const auto& key : keys) {
            if (!n.next.count(key)) continue;
            const bool changed = n.next[key] != n.current[key];
            if (verbose)
                text += std::string(changed ? "*" : " ") + "        " + key + "        " + shown(key, "0") +
                        "        " + shown(key, n.current[key]) + "        " + shown(key, n.next[key]) + "\n";
            else
                text += "         " + key + "        " + shown(key, n.next[key]) + "\n";
        }
        return out(text);
    }

    int down_left_ = 0;
    bool gone_ = false;
};

}  // namespace kiln::test
