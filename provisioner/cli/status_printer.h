// How a run shows itself: a live one-line status on a terminal (like
// ninja's "[37/200] firmware node-07: BMC update 45%"), plain timestamped
// lines elsewhere, or a JSON event stream (one object a line) for machines.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "provisioner/engine/engine.h"

namespace kiln::cli {

class StatusPrinter : public engine::EventSink {
public:
    enum class Mode { Live, Lines, JsonLines, Json };
    // Live and Lines write to `out`; JsonLines (--log-format json) writes
    // log objects; Json (--json) writes the event stream.
    StatusPrinter(Mode mode, std::FILE* out) : mode_(mode), out_(out) {}

    void on_event(const engine::EngineEvent& e) override;
    // Clears the live line so a summary can follow.
    void finish();

    static std::string timestamp();  // RFC 3339 UTC with milliseconds

private:
    void live(const engine::EngineEvent& e);
    void line(const engine::EngineEvent& e);
    void json(const engine::EngineEvent& e, bool log_form);

    Mode mode_;
    std::FILE* out_;
    std::mutex mu_;
    bool live_shown_ = false;
};

const char* event_name(engine::EngineEvent::Kind kind);

}  // namespace kiln::cli
