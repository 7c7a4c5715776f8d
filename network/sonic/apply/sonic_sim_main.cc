// kiln-sonic-sim: the emulated SONiC switch CLI (see sonic_sim.h).
//
//   kiln-sonic-sim [--state DIR] [--yang DIR] config ARGS...
//   kiln-sonic-sim [--state DIR] [--yang DIR] sonic-cfggen -d --print-data
//   kiln-sonic-sim [--state DIR] [--yang DIR] --ssh     (sshd ForceCommand: runs $SSH_ORIGINAL_COMMAND)
//   config ... / sonic-cfggen ...                       (a link named so; state from the environment)
// State dir: --state, else $KILN_SONIC_SIM_STATE. YANG dir: --yang, else the
// validator's default ($KILN_SONIC_YANG_DIR or the build's copy).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "network/sonic/apply/sonic_sim.h"

// In sanitizer builds: sshd runs the simulator with a clean environment, so
// CI's LSAN_OPTIONS never reach it. Carry the one suppression it needs
// (.ci/lsan.supp: libyang 2.1.30 leaks a union value it stores) in the binary.
// LSan looks this name up; it is reserved because the runtime owns it.
extern "C" const char* __lsan_default_suppressions();   // NOLINT(bugprone-reserved-identifier)
extern "C" const char* __lsan_default_suppressions() {  // NOLINT(bugprone-reserved-identifier)
    return "leak:lyplg_type_store_union\n";
}

int main(int argc, char** argv) {
    using kiln::network::sonic::SonicSim;
    std::vector<std::string> args(argv, argv + argc);
    std::string self = args[0];
    if (auto slash = self.rfind('/'); slash != std::string::npos) self = self.substr(slash + 1);
    args.erase(args.begin());

    std::string state = std::getenv("KILN_SONIC_SIM_STATE") ? std::getenv("KILN_SONIC_SIM_STATE") : "";
    std::string yang = kiln::network::sonic::default_yang_dir();
    bool ssh = false;
    if (self == "config" || self == "sonic-cfggen") {
        args.insert(args.begin(), self);
    } else {
        while (!args.empty() && args[0].rfind("--", 0) == 0) {
            const std::string opt = args[0];
            args.erase(args.begin());
            if (opt == "--ssh") {
                ssh = true;
            } else if ((opt == "--state" || opt == "--yang") && !args.empty()) {
                (opt == "--state" ? state : yang) = args[0];
                args.erase(args.begin());
            } else {
                std::cerr << "kiln-sonic-sim: unknown option " << opt << "\n";
                return 2;
            }
        }
        if (ssh) {
            const char* line = std::getenv("SSH_ORIGINAL_COMMAND");
            args = kiln::network::sonic::split_command_line(line ? line : "");
        }
    }
    if (state.empty()) {
        std::cerr << "kiln-sonic-sim: no state dir (--state DIR or KILN_SONIC_SIM_STATE)\n";
        return 2;
    }
    auto validator = kiln::network::sonic::YangValidator::load(yang);
    if (!validator) {
        std::cerr << "kiln-sonic-sim: " << validator.error().message << "\n";
        return 1;
    }
    SonicSim sim(state, *validator);
    return sim.run(args, std::cin, std::cout, std::cerr);
}
