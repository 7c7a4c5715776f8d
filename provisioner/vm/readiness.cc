#include "provisioner/vm/readiness.h"

#include <thread>

#include "provisioner/core/json_limits.h"
#include "provisioner/vm/guest_contract.h"

namespace kiln::vm {

namespace {

std::string last_line(const std::string& s) {
    size_t end = s.find_last_not_of("\r\n");
    if (end == std::string::npos) return "";
    const size_t start = s.find_last_of('\n', end);
    std::string line =
        s.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
    if (line.size() > 200) line = line.substr(0, 200) + "...";
    return line;
}

}  // namespace

std::optional<ReadyMarker> find_ready_marker(const std::string& serial) {
    const std::string marker = kReadyMarker;
    std::optional<ReadyMarker> found;
    size_t pos = 0;
    while ((pos = serial.find(marker, pos)) != std::string::npos) {
        // The marker starts a line (after a possible '\r' from the tty).
        const bool at_start = pos == 0 || serial[pos - 1] == '\n' || serial[pos - 1] == '\r';
        size_t end = serial.find('\n', pos);
        if (end == std::string::npos) {
            // A line still being written: wait for its newline.
            break;
        }
        std::string line = serial.substr(pos, end - pos);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        const bool whole_word = line.size() == marker.size() || line[marker.size()] == ' ';
        if (at_start && whole_word) {
            ReadyMarker m;
            m.line = line;
            const std::string rest = line.substr(marker.size());
            auto j = parse_json_limited(rest, "the readiness marker", {64u << 10, 8, 4096}, "vm");
            if (j && j->is_object()) m.detail = std::move(*j);
            found = std::move(m);
        }
        pos = end;
    }
    return found;
}

Result<ReadyObservation> observe_ready(Hypervisor& hv, const std::string& name) {
    ReadyObservation o;
    auto serial = hv.serial_output(name);
    std::string text;
    if (serial) {
        o.source = "serial log";
        text = *serial;
        o.not_yet = last_line(text);
        o.not_yet = o.not_yet.empty() ? "its serial log is empty" : "last serial line: " + o.not_yet;
    } else if (serial.error().code == "libvirt.remote_serial") {
        o.source = "guest agent";
        auto file = hv.guest_file(name, kReadyFile);
        if (!file) {
            if (file.error().code != "libvirt.agent") return file.error();
            o.not_yet = std::string(kReadyFile) + " through the guest agent: " + file.error().message;
            return o;
        }
        text = *file;
        o.not_yet = std::string(kReadyFile) + " holds no marker line";
    } else {
        return serial.error();
    }
    o.marker = find_ready_marker(text);
    if (o.marker) o.not_yet.clear();
    return o;
}

Result<std::optional<ReadyMarker>> check_ready(Hypervisor& hv, const std::string& name, std::string* not_yet) {
    auto seen = observe_ready(hv, name);
    if (!seen) return seen.error();
    if (seen->marker) return seen->marker;
    auto info = hv.lookup(name);
    if (!info) return info.error();
    if (!*info || (*info)->state != DomainState::running) {
        const std::string state = *info ? state_name((*info)->state) : "gone";
        // It may have printed the marker just before stopping.
        auto again = observe_ready(hv, name);
        if (again && again->marker) return again->marker;
        const std::string why = again ? again->not_yet : seen->not_yet;
        return make_error("vm", "vm.stopped",
                          "domain " + name + " is " + state + " before it printed " + kReadyMarker + " (" + why + ")");
    }
    if (not_yet) *not_yet = seen->not_yet;
    return std::optional<ReadyMarker>();
}

Error not_ready_error(const std::string& name, std::chrono::milliseconds timeout, const std::string& not_yet) {
    return make_error("vm", "vm.not_ready",
                      "domain " + name + " printed no " + kReadyMarker + " within " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) + " s (" +
                          not_yet + ")",
                      /*transient=*/true);
}

Result<ReadyMarker> wait_ready(Hypervisor& hv, const std::string& name, const ReadyWait& wait) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + wait.timeout;
    auto sleep = wait.sleep ? wait.sleep : [](std::chrono::milliseconds d) {
        std::this_thread::sleep_for(d);
        return true;
    };
    for (;;) {
        std::string not_yet;
        auto seen = check_ready(hv, name, &not_yet);
        if (!seen) return seen.error();
        if (*seen) return **seen;
        const auto now = Clock::now();
        if (now >= deadline) return not_ready_error(name, wait.timeout, not_yet);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        if (!sleep(std::min(wait.poll, left))) {
            return make_error("vm", "vm.interrupted", "stopped waiting for " + name + " to be ready");
        }
    }
}

}  // namespace kiln::vm
