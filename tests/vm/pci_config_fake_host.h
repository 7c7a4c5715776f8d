// A scripted GPU host's PCI config space behind `setpci`, for the ACS path
// no test machine may touch. It holds the 4096 config bytes of each function
// (loaded from a sysfs fixture's `config` files) and answers
//   setpci -s BDF ECAP_ACS+6.w              the 16 bits, as "001d"
//   setpci -s BDF ECAP_ACS+6.w=VALUE:MASK   read-modify-write of those bits
// finding the ACS capability (ID 0x000d) on the extended capability chain
// from 0x100, as setpci does; a device without it answers setpci's error.
// Ports in `ignores_writes` keep their bytes (hard-wired control bits).
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "provisioner/core/command.h"

namespace kiln::vm::test {

class PciConfigFakeHost : public CommandRunner {
public:
    std::map<std::string, std::string> config;  // BDF -> bytes
    bool has_setpci = true;
    bool refuse_writes = false;  // as a non-root user: "Permission denied"
    std::set<std::string> ignores_writes;

    std::vector<std::vector<std::string>> calls;
    std::vector<std::vector<std::string>> writes;

    // Every function's `config` under a sysfs root's bus/pci/devices.
    void load(const std::string& sysfs_root) {
        for (const auto& e : std::filesystem::directory_iterator(sysfs_root + "/bus/pci/devices")) {
            std::ifstream f(e.path() / "config", std::ios::binary);
            if (!f) continue;
            config[e.path().filename().string()] =
                std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        }
    }

    // ACS Control of a function as the bytes hold it; nullopt without the capability.
    std::optional<unsigned> acs_ctrl(const std::string& bdf) const {
        auto it = config.find(bdf);
        if (it == config.end()) return std::nullopt;
        auto at = acs_offset(it->second);
        if (!at) return std::nullopt;
        return word(it->second, *at + 6);
    }

    Result<CommandResult> run(const CommandSpec& spec) override {
        calls.push_back(spec.argv);
        const auto& a = spec.argv;
        if (a[0] != "setpci" || !has_setpci) return fail(127, "bash: " + a[0] + ": command not found\n");
        if (a.size() != 4 || a[1] != "-s") return fail(1, "setpci: bad arguments\n");
        auto it = config.find(a[2]);
        if (it == config.end()) return fail(1, "setpci: Warning: No devices selected for \"" + a[3] + "\".\n");
        const std::string reg = "ECAP_ACS+6.w";
        if (a[3].rfind(reg, 0) != 0) return fail(1, "setpci: unknown register\n");
        auto at = acs_offset(it->second);
        if (!at) return fail(1, "setpci: Extended capability 0x0d not found\n");
        const size_t ctrl = *at + 6;
        if (a[3] == reg) {
            char buf[16];
            std::snprintf(buf, sizeof buf, "%04x\n", word(it->second, ctrl));
            return out(buf);
        }
        // =VALUE:MASK
        const std::string arg = a[3].substr(reg.size());
        const size_t colon = arg.find(':');
        if (arg.empty() || arg[0] != '=' || colon == std::string::npos) return fail(1, "setpci: bad value\n");
        writes.push_back(a);
        if (refuse_writes) return fail(1, "setpci: Unable to write to " + a[2] + ": Permission denied\n");
        const unsigned value = std::stoul(arg.substr(1, colon - 1), nullptr, 16);
        const unsigned mask = std::stoul(arg.substr(colon + 1), nullptr, 16);
        if (ignores_writes.count(a[2])) return out("");
        const unsigned now = word(it->second, ctrl);
        put(it->second, ctrl, (now & ~mask) | (value & mask));
        return out("");
    }

private:
    static unsigned word(const std::string& b, size_t at) {
        return static_cast<unsigned char>(b[at]) | static_cast<unsigned>(static_cast<unsigned char>(b[at + 1])) << 8;
    }
    static void put(std::string& b, size_t at, unsigned v) {
        b[at] = static_cast<char>(v & 0xff);
        b[at + 1] = static_cast<char>(v >> 8 & 0xff);
    }
    // Extended capabilities: a 32-bit header at 0x100, ID in bits 0-15, next in 20-31.
    static std::optional<size_t> acs_offset(const std::string& b) {
        size_t at = 0x100;
        for (int hops = 0; hops < 64 && at >= 0x100 && at + 8 <= b.size(); ++hops) {
            const unsigned id = word(b, at);
            const unsigned next = word(b, at + 2) >> 4;
            if (id == 0x000d) return at;
            if (next == 0 || next == at) return std::nullopt;
            at = next;
        }
        return std::nullopt;
    }
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
};

}  // namespace kiln::vm::test
