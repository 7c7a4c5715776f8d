#include "images/appliance_watchdog.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace kiln::images {

namespace fs = std::filesystem;

namespace {

// /proc/PID/cmdline as its NUL-separated words.
std::vector<std::string> cmdline_of(const fs::path& proc_dir) {
    std::ifstream in(proc_dir / "cmdline", std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::string> words;
    std::string w;
    for (char c : raw) {
        if (c == '\0') {
            words.push_back(w);
            w.clear();
        } else {
            w += c;
        }
    }
    if (!w.empty()) words.push_back(w);
    return words;
}

bool is_qemu_system(const std::string& argv0) {
    return fs::path(argv0).filename().string().rfind("qemu-system", 0) == 0;
}

}  // namespace

std::vector<pid_t> appliance_processes(const std::string& drive_path) {
    std::vector<pid_t> out;
    if (drive_path.empty()) return out;
    std::error_code ec;
    for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        const auto words = cmdline_of(it->path());
        if (words.empty() || !is_qemu_system(words[0])) continue;
        // qemu's -drive takes "file=PATH,..." (commas in PATH doubled).
        for (const auto& w : words) {
            if (w.find(drive_path) != std::string::npos) {
                out.push_back(static_cast<pid_t>(std::stol(name)));
                break;
            }
        }
    }
    return out;
}

ApplianceWatchdog::ApplianceWatchdog(std::string drive_path, std::chrono::milliseconds deadline)
    : drive_path_(std::move(drive_path)), deadline_(deadline), thread_([this] { watch(); }) {}

ApplianceWatchdog::~ApplianceWatchdog() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        done_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

std::optional<pid_t> ApplianceWatchdog::killed() const {
    std::lock_guard<std::mutex> lk(mu_);
    return killed_;
}

void ApplianceWatchdog::watch() {
    std::unique_lock<std::mutex> lk(mu_);
    if (cv_.wait_for(lk, deadline_, [&] { return done_; })) return;
    // Past the deadline: kill what runs this drive, and keep looking until
    // the call returns (a launch may not have started qemu yet).
    while (!done_) {
        for (pid_t pid : appliance_processes(drive_path_)) {
            if (::kill(pid, SIGKILL) == 0 && !killed_) killed_ = pid;
        }
        cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return done_; });
    }
}

}  // namespace kiln::images
