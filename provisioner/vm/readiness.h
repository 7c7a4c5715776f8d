// Readiness: the guest prints guest_contract.h's marker on its first serial
// port ("KILN_READY {json}") once it is up, and writes the same line to
// kReadyFile. kiln reads the serial log through the Hypervisor, or on a
// remote connection (whose log it cannot read) the file through the guest
// agent, until the marker appears, the domain stops running, the timeout
// passes, or the run is told to stop. Readiness is always observed: no
// connection makes a VM ready without its marker.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"
#include "provisioner/vm/hypervisor.h"

namespace kiln::vm {

struct ReadyMarker {
    std::string line;                                  // the whole line, marker included
    nlohmann::json detail = nlohmann::json::object();  // the JSON after the marker; {} when absent or unparsable
};

// The last marker line in serial output (a console may also carry kernel
// messages and carriage returns); nullopt when there is none.
std::optional<ReadyMarker> find_ready_marker(const std::string& serial);

// One look at a guest: its marker if it has written one, else why not.
struct ReadyObservation {
    std::optional<ReadyMarker> marker;
    std::string source;   // "serial log" | "guest agent"
    std::string not_yet;  // no marker: the serial log's last line, or what the agent said
};

// Errors only when the hypervisor cannot be asked at all; an agent that
// does not answer yet is a guest still booting (not_yet says so).
Result<ReadyObservation> observe_ready(Hypervisor& hv, const std::string& name);

struct ReadyWait {
    std::chrono::milliseconds timeout{std::chrono::minutes(10)};
    std::chrono::milliseconds poll{std::chrono::milliseconds(250)};
    // Sleeps up to the given time; false when the wait must end early (a
    // stage's StageContext::wait_for). Default: a plain sleep.
    std::function<bool(std::chrono::milliseconds)> sleep;
};

// Errors: "vm.not_ready" at the timeout (transient), "vm.stopped" when
// the domain is no longer running (with the serial output's last line),
// "vm.interrupted" when sleep says stop.
Result<ReadyMarker> wait_ready(Hypervisor& hv, const std::string& name, const ReadyWait& wait);

// One look of wait_ready's, for callers that park between looks: the
// marker; nullopt while the domain runs without one (`not_yet` says why);
// "vm.stopped" once it is no longer running.
Result<std::optional<ReadyMarker>> check_ready(Hypervisor& hv, const std::string& name, std::string* not_yet);

// The error wait_ready ends with when `timeout` passed without a marker.
Error not_ready_error(const std::string& name, std::chrono::milliseconds timeout, const std::string& not_yet);

}  // namespace kiln::vm
