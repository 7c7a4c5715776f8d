// A field of /proc/PID/status, for tests that bound a process's threads.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>

namespace kiln::test {

// The "Threads:" of `pid`; 0 when the process has ended or is unreadable.
inline int proc_threads(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return 0;
}

}  // namespace kiln::test
