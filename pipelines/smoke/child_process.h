// A program kiln-smoke starts inside the guest (perftest's ib_write_bw):
// argv only, never a shell; stdout and stderr together into one buffer
// (capped); every wait bounded by a deadline, and a child past it is killed
// with its process group. kiln-smoke links no kiln library, so this is its
// own small spawner.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <string>
#include <vector>

namespace kiln::smoke {

struct ChildResult {
    int exit_code = -1;      // -1: killed or not started
    bool timed_out = false;  // killed at the deadline
    std::string output;      // stdout and stderr, as they came (at most 256 KiB)
    std::string error;       // why it could not be started
};

class Child {
public:
    using Deadline = std::chrono::steady_clock::time_point;

    Child() = default;
    ~Child();  // kills a child still running
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // False with `error()` set when the program cannot be started.
    bool start(const std::vector<std::string>& argv);
    // Reads output until `text` appears, the child ends, or the deadline;
    // true when `text` appeared.
    bool wait_for_output(const std::string& text, Deadline deadline);
    // Waits for the end; at the deadline the child is killed.
    ChildResult wait(Deadline deadline);
    // Kills the child (and its process group) now and reaps it.
    ChildResult kill_now();
    const std::string& output() const { return result_.output; }
    const std::string& error() const { return result_.error; }

private:
    // Reads what is there, waiting at most until `deadline`; false at EOF.
    bool read_some(Deadline deadline);
    void reap(bool block);

    pid_t pid_ = -1;
    int fd_ = -1;
    ChildResult result_;
};

// Starts `argv` and waits for it, at most until `deadline`.
ChildResult run_child(const std::vector<std::string>& argv, Child::Deadline deadline);

}  // namespace kiln::smoke
