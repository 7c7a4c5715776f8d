#include "provisioner/journal/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace kiln::journal {

Result<RunLock> RunLock::acquire(const std::string& journal_path) {
    const std::string path = journal_path + ".lock";
    std::error_code ec;
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return make_error("journal", "journal.lock", "cannot open " + path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {};
        ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
        std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
        while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
        ::close(fd);
        return make_error("journal", "journal.locked",
                          "another kiln run (pid " + pid + ") holds " + path + "; wait for it or stop it");
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
    return RunLock(fd);
}

bool RunLock::held(const std::string& journal_path) {
    int fd = ::open((journal_path + ".lock").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool busy = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
    ::close(fd);
    return busy;
}

RunLock::~RunLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace kiln::journal
