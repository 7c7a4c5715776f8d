#include "network/host/host_reboot.h"

#include "network/host/text.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

namespace kiln::network::host {

const std::vector<std::string> kRebootArgv = {"systemctl", "reboot"};

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// "40s", or "250ms" under a second (tests wait that little).
std::string dur(milliseconds d) {
    return d < std::chrono::seconds(1)
               ? fmt::format("{}ms", d.count())
               : fmt::format("{}s", std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

milliseconds since(Clock::time_point t) {
    return std::chrono::duration_cast<milliseconds>(Clock::now() - t);
}

}  // namespace

Result<std::string> read_boot_id(CommandRunner& runner, milliseconds timeout) {
    CommandSpec spec;
    spec.argv = {"cat", "/proc/sys/kernel/random/boot_id"};
    spec.timeout = timeout;
    spec.max_output = 4096;
    auto r = runner.run(spec);
    if (!r) return make_error("network", "network.boot_id_unreadable", "cannot read the boot id: " + r.error().message);
    const std::string id = trim(r->out);
    if (!r->success() || id.empty())
        return make_error("network", "network.boot_id_unreadable",
                          fmt::format("cannot read the boot id: {}",
                                      r->timed_out ? "timed out" : first_line(r->err.empty() ? r->out : r->err)),
                          r->timed_out);
    return id;
}

Result<std::string> reboot_and_wait(CommandRunner& runner, const RebootOptions& o) {
    auto before = read_boot_id(runner, o.command_timeout);
    if (!before) return before.error();
    auto wait = o.wait ? o.wait : [](milliseconds d) {
        std::this_thread::sleep_for(d);
        return true;
    };
    auto progress = [&](const std::string& m) {
        if (o.progress) o.progress(m);
    };

    progress(fmt::format("rebooting the host ({})", describe_argv(kRebootArgv)));
    const auto start = Clock::now();
    const auto deadline = start + o.timeout;
    CommandSpec spec;
    spec.argv = kRebootArgv;
    spec.timeout = std::min(o.command_timeout, o.timeout);
    spec.max_output = 64u << 10;
    auto r = runner.run(spec);
    // The connection dropping under the command (ssh exits 255, a signal, a
    // timeout) is what a reboot looks like; a plain refusal is not.
    if (!r)
        return make_error("network", "network.reboot_refused",
                          fmt::format("{} could not start: {}", describe_argv(kRebootArgv), r.error().message));
    if (!r->success() && !r->timed_out && r->signal == 0 && r->exit_code != 255)
        return make_error("network", "network.reboot_refused",
                          fmt::format("{} failed (exit {}): {}", describe_argv(kRebootArgv), r->exit_code,
                                      first_line(r->err.empty() ? r->out : r->err)));

    std::string last = "no answer yet";
    while (true) {
        const auto now = Clock::now();
        if (now >= deadline) break;
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
        if (!wait(std::min(o.poll_interval, left)))
            return make_error("network", "network.stopped",
                              "stopped while waiting for the host to come back from its reboot");
        const auto left_now = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        if (left_now <= milliseconds(0)) break;
        auto id = read_boot_id(runner, std::min(o.command_timeout, left_now));
        if (id && *id != *before) {
            progress(fmt::format("the host is back after {} (new boot id)", dur(since(start))));
            return *id;
        }
        last = id ? "the boot id has not changed: the host has not rebooted yet" : id.error().message;
        progress(
            fmt::format("waiting for the host to come back ({} of {}): {}", dur(since(start)), dur(o.timeout), last));
    }
    return make_error("network", "network.reboot_timeout",
                      fmt::format("the host did not come back within {} of `{}` (last: {})", dur(o.timeout),
                                  describe_argv(kRebootArgv), last),
                      true);
}

}  // namespace kiln::network::host
