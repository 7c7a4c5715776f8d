// One writer per journal: `kiln apply` holds an exclusive lock on
// JOURNAL.lock for the whole run, so two runs never drive the same nodes.
// The kernel drops the lock when the process dies, even by SIGKILL.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln::journal {

class RunLock {
public:
    // Fails with code "journal.locked" (naming the holder's pid) when held.
    static Result<RunLock> acquire(const std::string& journal_path);
    // True when some process holds the lock now (status uses it to tell a
    // live run from one that was killed).
    static bool held(const std::string& journal_path);

    RunLock(RunLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    RunLock& operator=(RunLock&&) = delete;
    RunLock(const RunLock&) = delete;
    ~RunLock();

private:
    explicit RunLock(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace kiln::journal
