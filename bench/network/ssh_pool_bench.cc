// bench/network ssh pool: the SONiC driver's read command (`sonic-cfggen -d
// --print-data`) run --commands times against an emulated switch behind a
// real sshd (tests/network/sonic_ssh_target.sh; ssh_pool_bench.sh starts
// it), one SSH connection per command (the baseline, SshTarget::multiplex =
// false) against commands riding one pooled master connection. The two take
// turns for --rounds rounds; the pooled round starts with no master, so it
// pays its one connection. Connections are counted from sshd's log.
// Writes seconds per command, the ratio and the counts to --out as JSON.
#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "network/ssh_control.h"
#include "network/ssh_runner.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::map<std::string, std::string> read_env(const std::string& path) {
    std::map<std::string, std::string> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    return out;
}

int accepted_connections(const std::string& log) {
    std::ifstream in(log);
    int n = 0;
    std::string line;
    while (std::getline(in, line)) n += line.rfind("Accepted publickey for ", 0) == 0;
    return n;
}

struct Round {
    double seconds = 0;
    int connections = 0;
};

// --commands reads through one runner; false when one fails.
bool run_round(const kiln::network::SshTarget& target, int commands, const std::string& log, Round& round) {
    kiln::network::close_ssh_masters();
    kiln::network::SshRunner runner(target, std::make_shared<kiln::ProcessRunner>());
    kiln::CommandSpec spec;
    spec.argv = {"sonic-cfggen", "-d", "--print-data"};
    spec.timeout = std::chrono::seconds(30);
    const int before = accepted_connections(log);
    const auto start = Clock::now();
    for (int i = 0; i < commands; ++i) {
        auto r = runner.run(spec);
        if (!r || !r->success()) {
            std::cerr << "command " << i
                      << " failed: " << (r ? kiln::network::describe_remote_failure(*r) : r.error().message) << "\n";
            return false;
        }
    }
    round.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    round.connections = accepted_connections(log) - before;
    kiln::network::close_ssh_masters();
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln SSH connection pooling benchmark"};
    std::string target_dir, out = "bench/results/network-ssh.json";
    int commands = 50, rounds = 3;
    app.add_option("--target", target_dir, "folder of a running sonic_ssh_target.sh target")->required();
    app.add_option("--out", out, "results JSON");
    app.add_option("--commands", commands, "commands per round");
    app.add_option("--rounds", rounds, "rounds of each mode, taking turns; the fastest counts");
    CLI11_PARSE(app, argc, argv);

    auto env = read_env(target_dir + "/target.env");
    if (!env.count("HOST")) return std::cerr << target_dir << "/target.env: no HOST (is the target up?)\n", 1;
    auto target =
        kiln::network::SshTarget::from_address(env["PORT"] == "22" ? env["HOST"] : env["HOST"] + ":" + env["PORT"]);
    if (!target) return std::cerr << target.error().message << "\n", 1;
    target->username = env["USER"];
    target->identity_file = env["IDENTITY"];
    target->known_hosts = env["KNOWN_HOSTS"];
    const std::string log = target_dir + "/sshd.log";

    double load_start[1] = {0}, load_end[1] = {0};
    ::getloadavg(load_start, 1);
    std::vector<Round> unpooled, pooled;
    for (int i = 0; i < rounds; ++i) {
        for (bool multiplex : {false, true}) {
            target->multiplex = multiplex;
            Round r;
            if (!run_round(*target, commands, log, r)) return 1;
            (multiplex ? pooled : unpooled).push_back(r);
        }
    }
    auto fastest = [](const std::vector<Round>& rs) {
        return *std::min_element(rs.begin(), rs.end(),
                                 [](const Round& a, const Round& b) { return a.seconds < b.seconds; });
    };
    const Round base = fastest(unpooled), pool = fastest(pooled);
    ::getloadavg(load_end, 1);
    json result = {
        {"benchmark", "network-ssh"},
        {"target", env["MODE"] == "netns" ? "sshd in a network namespace over a veth pair" : "sshd on loopback"},
        {"command", "sonic-cfggen -d --print-data (kiln-sonic-sim as the sshd ForceCommand)"},
        {"commands_per_round", commands},
        {"rounds", rounds},
        {"unpooled", {{"s_per_command", base.seconds / commands}, {"connections", base.connections}}},
        {"pooled", {{"s_per_command", pool.seconds / commands}, {"connections", pool.connections}}},
        {"speedup_unpooled_over_pooled", base.seconds / pool.seconds},
        {"load_average_1min", {{"start", load_start[0]}, {"end", load_end[0]}}},
    };
    std::ofstream(out) << result.dump(2) << "\n";
    std::cout << result.dump(2) << "\n";
    return 0;
}
