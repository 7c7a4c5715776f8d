#include "firmware/redfish/task_monitor.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "provisioner/net/url.h"

namespace kiln::redfish {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

TaskPhase task_phase(const std::string& raw_state, const std::string& raw_status) {
    // Compared case-insensitively: BMCs write "COMPLETED", "completed".
    const std::string state = lower(raw_state), status = lower(raw_status);
    static const char* running[] = {"new",        "starting", "running",   "pending",    "stopping",
                                    "cancelling", "service",  "suspended", "interrupted"};
    for (const char* s : running)
        if (state == s) return TaskPhase::Running;
    if (state == "completed")
        return (status.empty() || status == "ok" || status == "warning") ? TaskPhase::Succeeded : TaskPhase::Failed;
    // Dell: the update is staged and waits for a host reboot. Not a failure:
    // the caller resets the host and reads the version back.
    if (state == "scheduled") return TaskPhase::Succeeded;
    return TaskPhase::Failed;  // Exception, Killed, Cancelled, or a state DSP0266 does not define
}

namespace {

// Dell answers TaskState Running while its job (Oem.Dell.JobState) is
// Scheduled: it will not run before a host reboot, so polling on would only
// run into the stage deadline.
bool dell_job_scheduled(const json& body) {
    if (!body.is_object()) return false;
    auto oem = body.find("Oem");
    if (oem == body.end() || !oem->is_object()) return false;
    auto dell = oem->find("Dell");
    if (dell == oem->end() || !dell->is_object()) return false;
    auto js = dell->find("JobState");
    return js != dell->end() && js->is_string() && lower(js->get<std::string>()) == "scheduled";
}

std::string str_of(const json& body, const char* key) {
    if (body.is_object() && body.contains(key) && body[key].is_string()) return body[key].get<std::string>();
    return "";
}

std::vector<std::string> messages_of(const json& body) {
    std::vector<std::string> out;
    if (!body.is_object() || !body.contains("Messages") || !body["Messages"].is_array()) return out;
    for (const auto& m : body["Messages"]) {
        if (!m.is_object()) continue;
        std::string id = str_of(m, "MessageId");
        std::string text = clip_utf8(str_of(m, "Message"), 200);
        // Either may be missing (some BMCs send only a Message): no stray ": ".
        if (id.empty() && text.empty()) continue;
        out.push_back(id.empty() ? text : text.empty() ? id : id + ": " + text);
    }
    return out;
}

int percent_of(const json& body) {
    if (body.is_object() && body.contains("PercentComplete") && body["PercentComplete"].is_number_integer())
        return body["PercentComplete"].get<int>();
    return -1;
}

milliseconds retry_after(const Response& r, milliseconds fallback, milliseconds cap) {
    std::string ra = r.header("Retry-After");
    if (!ra.empty() && ra.size() < 9 && std::all_of(ra.begin(), ra.end(), [](char c) { return std::isdigit(c); }))
        return std::min(cap, milliseconds(std::stoll(ra) * 1000));
    return fallback;
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : "; ") + s;
    return out;
}

}  // namespace

TaskPoll::TaskPoll(std::string uri, milliseconds first_wait, const TaskOptions& options)
    : options_(options), next_(first_wait), deadline_(Clock::now() + options.timeout) {
    result_.monitor = std::move(uri);
}

TaskPoll TaskPoll::of_uri(const std::string& uri, const TaskOptions& options) {
    return TaskPoll(uri, milliseconds(0), options);
}

Result<TaskPoll> TaskPoll::start(Client& client, const Response& accepted, const TaskOptions& options) {
    if (!accepted.ok()) return status_error(accepted);
    std::string monitor = accepted.header("Location");
    if (monitor.empty()) monitor = str_of(accepted.body, "@odata.id");
    bool is_task = !str_of(accepted.body, "TaskState").empty();
    if (accepted.status != 202 && !is_task) {
        TaskPoll done("", milliseconds(0), options);
        done.result_.final_body = accepted.body;
        done.done_ = true;
        return done;
    }
    if (monitor.empty())
        return make_error("redfish", "redfish.missing",
                          fmt::format("{} {}: HTTP {} without a Location task monitor", accepted.method, accepted.uri,
                                      accepted.status));
    // Location may be absolute; the session refuses other hosts.
    if (monitor.rfind("http", 0) == 0) {
        auto parts = net::split_url(monitor);
        if (!parts) return parts.error();
        std::string origin = client.session().origin();
        auto own = net::split_url(origin);
        if (!own || own->host != parts->host)
            return make_error("redfish", "redfish.redirect",
                              fmt::format("{} {}: task monitor on another host ({}) refused", accepted.method,
                                          accepted.uri, parts->host));
        monitor = parts->target;
    }
    return TaskPoll(monitor, retry_after(accepted, milliseconds(0), options.max_poll_interval), options);
}

Status TaskPoll::step(Client& client) {
    const std::string& uri = result_.monitor;
    next_ = milliseconds(0);
    if (Clock::now() >= deadline_)
        return make_error(
            "redfish", "redfish.task_timeout",
            fmt::format("task {}: still {} after {} s{}", uri, result_.state, options_.timeout.count() / 1000,
                        last_error_.empty() ? "" : " (last error: " + last_error_ + ")"),
            true);
    next_ = options_.poll_interval;
    ++result_.polls;
    auto r = client.get_any(uri);
    if (!r) {
        // A BMC restarting after its own update drops connections for a
        // while: keep polling until the task timeout.
        if (!r.error().transient) return r.error();
        last_error_ = r.error().message;
        return ok_status();
    }
    if (r->status == 202) {
        result_.state = str_of(r->body, "TaskState").empty() ? "Running" : str_of(r->body, "TaskState");
        if (r->body.is_object()) result_.final_body = r->body;  // its Oem.Dell.Id names the job
        if (options_.progress) options_.progress(result_.state, percent_of(r->body));
        if (dell_job_scheduled(r->body)) {
            result_.state = "Scheduled";
            result_.final_body = r->body;
            done_ = true;
            return ok_status();
        }
        next_ = paced(retry_after(*r, options_.poll_interval, options_.max_poll_interval), percent_of(r->body));
        return ok_status();
    }
    if (r->status >= 500 || r->status == 429 || r->status == 401) {
        last_error_ = fmt::format("HTTP {}", r->status);
        next_ = retry_after(*r, options_.poll_interval, options_.max_poll_interval);
        return ok_status();
    }
    if (r->status == 404 && result_.polls > 1 && !result_.final_body.is_null()) {
        // Some BMCs drop a finished task monitor: the last state stands.
        if (task_phase(result_.state, result_.status) == TaskPhase::Succeeded) {
            done_ = true;
            return ok_status();
        }
    }
    if (r->status == 404 && result_.polls > 1 && task_phase(result_.state, "") == TaskPhase::Running) {
        // Purged while it ran (Dell clears finished jobs): its outcome is
        // unknown here, so the caller's read-back decides.
        result_.state = "Purged";
        done_ = true;
        return ok_status();
    }
    if (!r->ok()) return status_error(*r);
    result_.final_body = r->body;
    std::string state = str_of(r->body, "TaskState");
    if (state.empty()) {
        // The monitor answered with the operation's own result: done.
        result_.state = "Completed";
        done_ = true;
        return ok_status();
    }
    result_.state = state;
    if (r->body.is_object() && r->body.contains("TaskStatus") && r->body["TaskStatus"].is_string())
        result_.status = r->body["TaskStatus"].get<std::string>();
    if (options_.progress) options_.progress(state, percent_of(r->body));
    TaskPhase phase = task_phase(state, result_.status);
    if (phase == TaskPhase::Running && dell_job_scheduled(r->body)) {
        result_.state = "Scheduled";
        done_ = true;
        return ok_status();
    }
    if (phase == TaskPhase::Running) {
        next_ = paced(retry_after(*r, options_.poll_interval, options_.max_poll_interval), percent_of(r->body));
        return ok_status();
    }
    result_.messages = messages_of(r->body);
    if (phase == TaskPhase::Succeeded) {
        done_ = true;
        return ok_status();
    }
    return make_error(
        "redfish", "redfish.task_failed",
        fmt::format("task {}: {}{}{}", uri, state, result_.status.empty() ? "" : " with status " + result_.status,
                    result_.messages.empty() ? "" : ": " + join(result_.messages)));
}

milliseconds TaskPoll::paced(milliseconds floor, int percent) {
    if (percent <= 0 || percent >= 100) return floor;
    const auto now = options_.now ? options_.now() : Clock::now();
    if (first_percent_ < 0) {
        first_percent_ = percent;
        first_seen_ = now;
        return floor;
    }
    const double gained = percent - first_percent_;
    const double seconds = std::chrono::duration<double>(now - first_seen_).count();
    if (gained <= 0 || seconds <= 0) return floor;  // no rate yet (or it went back)
    const double left_s = (100 - percent) * seconds / gained;
    const auto half = milliseconds(static_cast<int64_t>(left_s * 500));
    return std::clamp(half, floor, std::max(floor, options_.max_poll_interval));
}

json TaskPoll::save() const {
    const auto since = [](Clock::time_point t) {
        return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
    };
    return json{{"monitor", result_.monitor},
                {"state", result_.state},
                {"status", result_.status},
                {"messages", result_.messages},
                {"polls", result_.polls},
                {"final_body", result_.final_body},
                {"deadline_ms", since(deadline_)},
                {"last_error", last_error_},
                {"done", done_},
                {"first_percent", first_percent_},
                {"first_seen_ms", since(first_seen_)}};
}

Result<TaskPoll> TaskPoll::restore(const json& saved, const TaskOptions& options) {
    try {
        TaskPoll p(saved.at("monitor").get<std::string>(), milliseconds(0), options);
        p.result_.state = saved.at("state").get<std::string>();
        p.result_.status = saved.at("status").get<std::string>();
        p.result_.messages = saved.at("messages").get<std::vector<std::string>>();
        p.result_.polls = saved.at("polls").get<int>();
        p.result_.final_body = saved.at("final_body");
        p.deadline_ = Clock::time_point(milliseconds(saved.at("deadline_ms").get<int64_t>()));
        p.last_error_ = saved.at("last_error").get<std::string>();
        p.done_ = saved.at("done").get<bool>();
        // Older saved polls (a resume across an upgrade) lack the pacing.
        p.first_percent_ = saved.value("first_percent", -1);
        p.first_seen_ = Clock::time_point(milliseconds(saved.value("first_seen_ms", int64_t{0})));
        return p;
    } catch (const json::exception& e) {
        return make_error("redfish", "redfish.resume", std::string("task poll state unreadable: ") + e.what());
    }
}

namespace {

// Follows a poll to its end, sleeping in the client's wait between polls.
Result<TaskResult> run_poll(Client& client, TaskPoll poll) {
    while (!poll.done()) {
        if (poll.wait().count() > 0 && !client.wait(poll.wait()))
            return make_error("redfish", "redfish.stopped",
                              fmt::format("task {}: stopped while waiting", poll.result().monitor));
        if (auto s = poll.step(client); !s) return s.error();
    }
    return poll.result();
}

}  // namespace

Result<TaskResult> follow_task_uri(Client& client, const std::string& uri, const TaskOptions& options) {
    return run_poll(client, TaskPoll::of_uri(uri, options));
}

Result<TaskResult> follow_task(Client& client, const Response& accepted, const TaskOptions& options) {
    auto poll = TaskPoll::start(client, accepted, options);
    if (!poll) return poll.error();
    return run_poll(client, std::move(*poll));
}

std::string dell_job_id(const TaskResult& task) {
    const json& b = task.final_body;
    if (b.is_object() && b.contains("Oem") && b["Oem"].is_object() && b["Oem"].contains("Dell")) {
        std::string id = str_of(b["Oem"]["Dell"], "Id");
        if (id.rfind("JID_", 0) == 0) return id;
    }
    // iDRAC names its tasks after their jobs: /redfish/v1/TaskService/Tasks/JID_...
    auto slash = task.monitor.find_last_of('/');
    std::string last = slash == std::string::npos ? task.monitor : task.monitor.substr(slash + 1);
    return last.rfind("JID_", 0) == 0 ? last : "";
}

JobPhase job_phase(const std::string& raw_state) {
    const std::string state = lower(raw_state);
    if (state == "completed") return JobPhase::Completed;
    if (state == "failed" || state == "completedwitherrors" || state == "rebootfailed") return JobPhase::Failed;
    return JobPhase::Waiting;  // New Scheduled Running Downloading RebootPending ...: the job goes on
}

Result<bool> poll_dell_job(Client& client, const std::string& job_uri, const TaskOptions& options, TaskResult& result,
                           std::string& last_error) {
    result.monitor = job_uri;
    ++result.polls;
    auto r = client.get_any(job_uri);
    if (!r) {
        if (!r.error().transient) return r.error();
        last_error = r.error().message;  // the host's reset may take the BMC's attention: read again
        return false;
    }
    if (r->status == 404) {
        // Cleared from the queue (a finished job may be): the read-back decides.
        result.state = "Purged";
        return true;
    }
    if (r->status >= 500 || r->status == 429 || r->status == 401) {
        last_error = fmt::format("HTTP {}", r->status);
        return false;
    }
    if (!r->ok()) return status_error(*r);
    result.final_body = r->body;
    std::string state = str_of(r->body, "JobState");
    if (state.empty()) return make_error("redfish", "redfish.missing", fmt::format("GET {}: no JobState", job_uri));
    result.state = state;
    if (options.progress) options.progress("job " + state, percent_of(r->body));
    JobPhase phase = job_phase(state);
    if (phase == JobPhase::Waiting && options.stop_at_scheduled && lower(state) == "scheduled") return true;
    if (phase == JobPhase::Waiting) return false;
    std::string message = clip_utf8(str_of(r->body, "Message"), 200);
    std::string id = str_of(r->body, "MessageId");
    if (!message.empty() || !id.empty())
        result.messages.push_back(id.empty() ? message : message.empty() ? id : id + ": " + message);
    if (phase == JobPhase::Completed) return true;
    return make_error(
        "redfish", "redfish.task_failed",
        fmt::format("job {}: {}{}", job_uri, state, result.messages.empty() ? "" : ": " + join(result.messages)));
}

Error job_timeout_error(const std::string& job_uri, const std::string& state, milliseconds timeout,
                        const std::string& last_error) {
    return make_error("redfish", "redfish.task_timeout",
                      fmt::format("job {}: still {} after {} s{}", job_uri, state, timeout.count() / 1000,
                                  last_error.empty() ? "" : " (last error: " + last_error + ")"),
                      true);
}

Result<TaskResult> follow_dell_job(Client& client, const std::string& job_uri, const TaskOptions& options) {
    TaskResult result;
    result.monitor = job_uri;
    result.state = "Scheduled";
    auto deadline = Clock::now() + options.timeout;
    std::string last_error;
    for (bool first = true;; first = false) {
        if (!first && !client.wait(options.poll_interval))
            return make_error("redfish", "redfish.stopped", fmt::format("job {}: stopped while waiting", job_uri));
        if (Clock::now() >= deadline) return job_timeout_error(job_uri, result.state, options.timeout, last_error);
        auto ended = poll_dell_job(client, job_uri, options, result, last_error);
        if (!ended) return ended.error();
        if (*ended) return result;
    }
}

}  // namespace kiln::redfish
