// Every child process kiln starts goes through a CommandRunner: argv only,
// never a shell; a deadline on every run; output captured with a cap.
// ProcessRunner is the real one; tests use a fake that records argv.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln {

struct CommandSpec {
    std::vector<std::string> argv;           // argv[0]: absolute path or a name looked up in PATH
    std::map<std::string, std::string> env;  // added to (or replacing in) the inherited environment
    std::vector<std::string> unset_env;      // removed from the inherited environment
    std::string cwd;                         // "" = inherit
    std::string stdin_data;                  // written to the child's stdin, then closed
    std::chrono::milliseconds timeout{std::chrono::minutes(10)};
    std::chrono::milliseconds kill_grace{std::chrono::seconds(5)};  // SIGTERM, then SIGKILL after this
    size_t max_output = 16u << 20;                                  // per stream; the rest is dropped and flagged
};

struct CommandResult {
    int exit_code = -1;      // when it exited
    int signal = 0;          // when a signal ended it
    bool timed_out = false;  // kiln ended it at the deadline
    bool truncated = false;  // output passed max_output
    std::string out;
    std::string err;
    std::chrono::milliseconds elapsed{0};
    bool success() const { return !timed_out && signal == 0 && exit_code == 0; }
};

// "argv[0] arg1 'arg with space'": for logs and errors (no env values).
std::string describe_argv(const std::vector<std::string>& argv);

class CommandRunner {
public:
    virtual ~CommandRunner() = default;
    // An error only when the command could not be started (not found, not
    // executable); a non-zero exit or a timeout is a result.
    virtual Result<CommandResult> run(const CommandSpec& spec) = 0;
};

class ProcessRunner : public CommandRunner {
public:
    Result<CommandResult> run(const CommandSpec& spec) override;
};

}  // namespace kiln
