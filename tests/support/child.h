// Runs a program as a child process (no shell), capturing its output and
// how it ended. For CLI and crash-safety tests.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::test {

struct ChildResult {
    int exit_code = -1;  // when it exited
    int signal = 0;      // when a signal ended it
    std::string out;
    std::string err;
    bool exited() const { return signal == 0; }
};

// `env` entries are added to (or replace in) the current environment.
ChildResult run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                      const std::string& cwd = "");

// A child left running, for tests that signal it (SIGSTOP, SIGCONT) or run
// several at once. Its output goes to files, read when it is waited for.
class RunningChild {
public:
    RunningChild(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                 const std::string& output_prefix);
    ~RunningChild();  // kills and reaps a child still running
    RunningChild(const RunningChild&) = delete;
    RunningChild& operator=(const RunningChild&) = delete;

    int pid() const { return pid_; }
    bool signal(int sig) const;
    // Waits until it ends or `seconds` pass; on the deadline it is killed
    // and `timed_out` set, so a hung child fails its test, never hangs it.
    ChildResult wait(int seconds, bool* timed_out = nullptr);
    // True once it has ended (reaped here; wait() still reports it).
    bool ended();

private:
    int pid_ = -1;
    bool reaped_ = false;
    int status_ = 0;
    std::string out_path_, err_path_;
};

}  // namespace kiln::test
