// The command runner: argv without a shell, stdin and output, exit status,
// deadlines, environment, missing programs.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "provisioner/core/command.h"

using kiln::CommandSpec;
using kiln::ProcessRunner;
using namespace std::chrono_literals;

TEST_CASE("command: argv goes to the program literally and never through a shell", "[command]") {
    ProcessRunner r;
    auto res = r.run({{"/bin/echo", "$(id -u)", "a;b", "*", "'q'"}});
    REQUIRE(res.ok());
    CHECK(res->success());
    CHECK(res->out == "$(id -u) a;b * 'q'\n");
}

TEST_CASE("command: the child gets stdin, stdout and stderr and none of kiln's other descriptors", "[command]") {
    // A descriptor kiln (or a library) opened without close-on-exec, at a
    // number no runner pipe takes.
    const int leaked = ::dup2(::open("/dev/null", O_RDONLY), 200);
    REQUIRE(leaked == 200);
    REQUIRE((::fcntl(leaked, F_GETFD) & FD_CLOEXEC) == 0);
    ProcessRunner r;
    auto res = r.run({{"/bin/ls", "-1", "/proc/self/fd"}});
    ::close(leaked);
    REQUIRE(res.ok());
    REQUIRE(res->success());
    // 0, 1, 2 and the folder ls itself reads (3).
    CHECK(res->out == "0\n1\n2\n3\n");
}

TEST_CASE("command: stdin is delivered and large output is captured whole", "[command]") {
    ProcessRunner r;
    CommandSpec spec{{"cat"}};
    spec.stdin_data.assign(3u << 20, 'x');  // larger than any pipe buffer, both ways
    spec.stdin_data += "end";
    auto res = r.run(spec);
    REQUIRE(res.ok());
    CHECK(res->success());
    CHECK(res->out.size() == spec.stdin_data.size());
    CHECK(res->out.substr(res->out.size() - 3) == "end");
    CHECK_FALSE(res->truncated);
}

// A hook that fails before reading its input: the write to its stdin gets
// EPIPE; SIGPIPE's default action would end the test process (and kiln).
TEST_CASE("command: a child that closes stdin unread is its exit status, not a SIGPIPE", "[command]") {
    ProcessRunner r;
    CommandSpec spec{{"/bin/sh", "-c", "exec 0<&-; echo closed; sleep 0.2; exit 3"}};
    spec.stdin_data.assign(8u << 20, 'x');  // far past the pipe buffer: the write must meet the closed end
    auto res = r.run(spec);
    REQUIRE(res.ok());
    CHECK(res->exit_code == 3);
    CHECK(res->out == "closed\n");
    sigset_t pending;
    sigpending(&pending);
    CHECK(sigismember(&pending, SIGPIPE) == 0);  // none left behind for a later unblock
}

TEST_CASE("command: exit codes and stderr are reported", "[command]") {
    ProcessRunner r;
    auto res = r.run({{"sh", "-c", "echo oops >&2; exit 3"}});
    REQUIRE(res.ok());
    CHECK_FALSE(res->success());
    CHECK(res->exit_code == 3);
    CHECK(res->err == "oops\n");
}

TEST_CASE("command: a program past its deadline is ended and flagged", "[command]") {
    ProcessRunner r;
    CommandSpec spec{{"sleep", "60"}};
    spec.timeout = 100ms;
    auto res = r.run(spec);
    REQUIRE(res.ok());
    CHECK(res->timed_out);
    CHECK(res->signal == SIGTERM);
    CHECK_FALSE(res->success());
}

TEST_CASE("command: a program that ignores SIGTERM is killed after the grace", "[command]") {
    ProcessRunner r;
    CommandSpec spec{{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}};
    spec.timeout = 200ms;
    spec.kill_grace = 200ms;
    auto res = r.run(spec);
    REQUIRE(res.ok());
    CHECK(res->timed_out);
    CHECK(res->signal == SIGKILL);
    CHECK(res->out == "ready\n");
}

TEST_CASE("command: environment is added and removed", "[command]") {
    ProcessRunner r;
    setenv("KILN_CMD_TEST_GONE", "x", 1);
    CommandSpec spec{{"sh", "-c", "echo \"$KILN_CMD_TEST_ADDED:${KILN_CMD_TEST_GONE:-unset}\""}};
    spec.env["KILN_CMD_TEST_ADDED"] = "yes";
    spec.unset_env = {"KILN_CMD_TEST_GONE"};
    auto res = r.run(spec);
    REQUIRE(res.ok());
    CHECK(res->out == "yes:unset\n");
}

TEST_CASE("command: output beyond the cap is dropped and flagged", "[command]") {
    ProcessRunner r;
    CommandSpec spec{{"head", "-c", "100000", "/dev/zero"}};
    spec.max_output = 1000;
    auto res = r.run(spec);
    REQUIRE(res.ok());
    CHECK(res->out.size() == 1000);
    CHECK(res->truncated);
}

TEST_CASE("command: a missing program is an error naming it", "[command]") {
    ProcessRunner r;
    auto res = r.run({{"kiln-no-such-program-anywhere"}});
    REQUIRE_FALSE(res.ok());
    CHECK(res.error().code == "command.not_found");
    CHECK_THAT(res.error().message, Catch::Contains("kiln-no-such-program-anywhere"));
    auto empty = r.run({});
    REQUIRE_FALSE(empty.ok());
    CHECK(empty.error().code == "command.empty");
}

TEST_CASE("command: argv is described with quoting for logs", "[command]") {
    CHECK(kiln::describe_argv({"qemu-img", "create", "-f", "qcow2", "a b.qcow2", "it's"}) ==
          "qemu-img create -f qcow2 'a b.qcow2' 'it'\\''s'");
}
