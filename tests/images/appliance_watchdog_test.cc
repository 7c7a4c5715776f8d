// The appliance watchdog against a stand-in for a hung qemu: a process whose
// argv[0] is "qemu-system-x86_64" and whose command line names a drive. The
// guarded "call" is a waitpid on it, which returns only if the watchdog kills
// it: exactly the shape of a guestfs call blocked on a dead appliance.
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

#include "images/appliance_watchdog.h"
#include "tests/support/temp_dir.h"

extern char** environ;

using kiln::images::appliance_processes;
using kiln::images::ApplianceWatchdog;
using kiln::test::TempDir;

namespace {

// tail -f on the drive: runs until killed, and its argv names the drive in
// qemu's own -drive form.
pid_t spawn_fake_qemu(const std::string& drive) {
    const std::string arg0 = "qemu-system-x86_64";
    const std::string follow = "-f";
    const std::string& spec = drive;
    char* argv[] = {const_cast<char*>(arg0.c_str()), const_cast<char*>(follow.c_str()), const_cast<char*>(spec.c_str()),
                    nullptr};
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, "/usr/bin/tail", nullptr, nullptr, argv, environ) == 0);
    return pid;
}

// /proc shows the new argv only once the child has exec'd.
bool wait_until_listed(const std::string& drive, pid_t pid) {
    for (int i = 0; i < 500; ++i) {
        for (pid_t p : appliance_processes(drive))
            if (p == pid) return true;
        ::usleep(10 * 1000);
    }
    return false;
}

}  // namespace

TEST_CASE("appliance watchdog: finds the qemu of one drive and not of another") {
    TempDir dir;
    const std::string drive = dir.write("staging/disk.qcow2", "");
    const std::string other = dir.write("other/disk.qcow2", "");
    const pid_t pid = spawn_fake_qemu(drive);
    REQUIRE(wait_until_listed(drive, pid));
    for (pid_t p : appliance_processes(other)) CHECK(p != pid);
    CHECK(appliance_processes("").empty());
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

TEST_CASE("appliance watchdog: a call past its deadline has its appliance killed and says which") {
    TempDir dir;
    const std::string drive = dir.write("staging/disk.qcow2", "");
    const pid_t pid = spawn_fake_qemu(drive);
    REQUIRE(wait_until_listed(drive, pid));
    int status = 0;
    std::optional<pid_t> killed;
    {
        ApplianceWatchdog dog(drive, std::chrono::milliseconds(0));
        REQUIRE(::waitpid(pid, &status, 0) == pid);  // returns only once killed
        killed = dog.killed();
    }
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    REQUIRE(killed.has_value());
    CHECK(*killed == pid);
}

TEST_CASE("appliance watchdog: a call that returns in time leaves the appliance alone") {
    TempDir dir;
    const std::string drive = dir.write("staging/disk.qcow2", "");
    const pid_t pid = spawn_fake_qemu(drive);
    REQUIRE(wait_until_listed(drive, pid));
    std::optional<pid_t> killed;
    {
        ApplianceWatchdog dog(drive, std::chrono::minutes(10));
        killed = dog.killed();
    }
    CHECK_FALSE(killed.has_value());
    CHECK(::waitpid(pid, nullptr, WNOHANG) == 0);  // still running
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}
