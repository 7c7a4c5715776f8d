// Runs a program as a child process (no shell), capturing its output and
// how it ended. For CLI and crash-safety tests.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::test {

struct ChildResult {
    int exit_code = -1;   // when it exited
    int signal = 0;       // when a signal ended it
    std::string out;
    std::string err;
    bool exited() const { return signal == 0; }
};

// `env` entries are added to (or replace in) the current environment.
ChildResult run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                      const std::string& cwd = "");

}  // namespace kiln::test
