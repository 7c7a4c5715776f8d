#include "provisioner/cli/status_printer.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln::cli {

using Kind = engine::EngineEvent::Kind;

const char* event_name(Kind kind) {
    switch (kind) {
        case Kind::RunStart:
            return "run.start";
        case Kind::StageStart:
            return "stage.start";
        case Kind::Progress:
            return "stage.progress";
        case Kind::Warning:
            return "stage.warning";
        case Kind::Action:
            return "action.start";
        case Kind::StageEnd:
            return "stage.end";
        case Kind::Retry:
            return "stage.retry";
        case Kind::NodeEnd:
            return "node.end";
        case Kind::Stop:
            return "run.stop";
        case Kind::RunEnd:
            return "run.end";
    }
    return "event";
}

std::string StatusPrinter::timestamp() {
    auto now = std::chrono::system_clock::now();
    auto secs = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

void StatusPrinter::on_event(const engine::EngineEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    switch (mode_) {
        case Mode::Live:
            live(e);
            break;
        case Mode::Lines:
            line(e);
            break;
        case Mode::JsonLines:
            json(e, true);
            break;
        case Mode::Json:
            json(e, false);
            break;
    }
}

void StatusPrinter::finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_shown_) {
        std::fputs("\r\033[K", out_);
        live_shown_ = false;
    }
    std::fflush(out_);
}

void StatusPrinter::live(const engine::EngineEvent& e) {
    // Lasting lines for what a person must not miss; the status line for the rest.
    if (e.kind == Kind::NodeEnd && (e.outcome == "failed" || e.outcome == "quarantined")) {
        std::fprintf(out_, "\r\033[K%s %s: %s\n", e.outcome.c_str(), e.node.c_str(), e.message.c_str());
    } else if (e.kind == Kind::Retry || e.kind == Kind::Stop) {
        std::fprintf(out_, "\r\033[K%s%s%s\n", e.node.c_str(), e.node.empty() ? "" : ": ", e.message.c_str());
    } else if (e.kind == Kind::Warning) {
        std::fprintf(out_, "\r\033[Kwarning: %s %s: %s\n", e.node.c_str(), e.stage.c_str(), e.message.c_str());
    }
    if (e.kind == Kind::RunEnd) return;
    std::string text = fmt::format("[{}/{}] {} {}", e.done, e.total, e.stage, e.node);
    if (!e.message.empty() && e.kind != Kind::NodeEnd) text += ": " + e.message;
    if (e.percent >= 0) text += fmt::format(" {}%", e.percent);
    winsize ws{};
    size_t width = (ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) ? ws.ws_col : 80;
    if (text.size() >= width) text = text.substr(0, width - 1);
    std::fprintf(out_, "\r\033[K%s", text.c_str());
    std::fflush(out_);
    live_shown_ = true;
}

void StatusPrinter::line(const engine::EngineEvent& e) {
    std::string what;
    switch (e.kind) {
        case Kind::RunStart:
            what = fmt::format("run start: fleet {}, {} node-stages", e.message, e.total);
            break;
        case Kind::StageStart:
            what = "start";
            break;
        case Kind::Progress:
            what = e.percent >= 0 ? fmt::format("{} {}%", e.message, e.percent) : e.message;
            break;
        case Kind::Warning:
            what = "warning: " + e.message;
            break;
        case Kind::Action:
            what = "action: " + e.message;
            break;
        case Kind::StageEnd:
            what = e.outcome + (e.message.empty() ? "" : " (" + e.message + ")");
            break;
        case Kind::Retry:
            what = e.message;
            break;
        case Kind::NodeEnd:
            what = "node " + e.outcome + (e.message.empty() ? "" : ": " + e.message);
            break;
        case Kind::Stop:
            what = e.message;
            break;
        case Kind::RunEnd:
            what = "run " + e.outcome;
            break;
    }
    std::string where = e.node.empty() ? "" : e.node + (e.stage.empty() ? "" : " " + e.stage) + ": ";
    std::fprintf(out_, "%s [%d/%d] %s%s\n", timestamp().c_str(), e.done, e.total, where.c_str(), what.c_str());
    std::fflush(out_);
}

void StatusPrinter::json(const engine::EngineEvent& e, bool log_form) {
    nlohmann::json j;
    j["ts"] = timestamp();
    j[log_form ? "msg" : "event"] = event_name(e.kind);
    if (!e.node.empty()) j["node"] = e.node;
    if (!e.stage.empty()) j["stage"] = e.stage;
    if (!e.message.empty()) j["message"] = e.message;
    if (!e.outcome.empty()) j["outcome"] = e.outcome;
    if (e.percent >= 0) j["percent"] = e.percent;
    j["done"] = e.done;
    j["total"] = e.total;
    std::fprintf(out_, "%s\n", j.dump().c_str());
    std::fflush(out_);
}

}  // namespace kiln::cli
