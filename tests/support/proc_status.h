// A field of /proc/PID/status, for tests that bound a process's threads.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace kiln::test {

// The "Threads:" of `pid`; 0 when the process has ended or is unreadable.
inline int proc_threads(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return 0;
}

// Samples this process's thread count until stopped; peak() is the most
// threads seen. A bound on the peak can miss a brief excess, never invent one.
class ThreadSampler {
public:
    ThreadSampler()
        : thread_([this] {
              while (!done_) {
                  peak_ = std::max(peak_.load(), proc_threads(::getpid()));
                  std::this_thread::sleep_for(std::chrono::milliseconds(10));
              }
          }) {}
    ~ThreadSampler() { stop(); }
    void stop() {
        done_ = true;
        if (thread_.joinable()) thread_.join();
    }
    int peak() const { return peak_; }

private:
    std::atomic<bool> done_{false};
    std::atomic<int> peak_{0};
    std::thread thread_;
};

}  // namespace kiln::test
