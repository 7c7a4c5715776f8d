#include "firmware/bmc/update_task.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace kiln::bmc {

using nlohmann::json;

std::string iso8601(double wall_seconds) {
    std::time_t t = static_cast<std::time_t>(std::floor(wall_seconds));
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
    return buf;
}

TaskProgress progress_at(const UpdateTask& task, double now) {
    if (task.scheduled) return {"Running", 100};
    if (task.done) return {task.outcome, task.outcome == "Completed" ? 100 : 0};
    if (task.started < 0) return {"New", 0};
    const double elapsed = now - task.started;
    if (task.duration <= 0 || elapsed >= task.duration) return {"Running", 99};  // done at the next advance
    if (elapsed < task.duration * 0.1) return {"New", 0};
    const int pct = static_cast<int>(std::floor(100.0 * elapsed / task.duration));
    return {"Running", std::clamp(pct, 1, 99)};
}

bool follows_only(const UpdateTask& task) {
    return task.kind == kResetTaskKind || !task.payload.empty();
}

json task_view(const UpdateTask& task, double now, const std::string& task_uri, const std::string& monitor_uri) {
    const TaskProgress p = progress_at(task, now);
    json body = {
        {"@odata.id", task_uri},
        {"@odata.type", "#Task.v1_7_0.Task"},
        {"Id", task.id},
        {"Name", task.kind + " task " + task.id},
        {"TaskState", p.state},
        {"TaskStatus", p.state == "Exception" ? "Critical" : "OK"},
        {"PercentComplete", p.percent},
        {"StartTime", iso8601(task.created)},
        {"TaskMonitor", monitor_uri},
        {"HidePayload", false},
        {"Payload",
         {{"HttpOperation", task.http_operation},
          {"TargetUri", task.action_uri},
          {"HttpHeaders", json::array()},
          {"JsonBody", task.kind == kResetTaskKind ? json{{"ResetType", task.reset_type}}.dump()
                       : !task.payload.empty()     ? task.payload
                                                   : json{{"ImageURI", task.image},
                                                      {"Targets", task.requested_targets},
                                                      {"@Redfish.OperationApplyTime", task.apply_time}}
                                                     .dump()}}},
        {"Messages", task.messages},
    };
    if (task.done) body["EndTime"] = iso8601(task.ended);
    return body;
}

namespace {

std::string dell_job_state(const UpdateTask& t, double now) {
    if (t.scheduled) return "Scheduled";
    if (t.done) return t.outcome == "Completed" ? "Completed" : "Failed";
    return progress_at(t, now).state == "New" && t.started < 0 ? "Downloading" : "Running";
}

// The job's Message: the last task message's text (a failure says why).
std::string dell_job_message(const UpdateTask& t, const std::string& state) {
    if (state == "Scheduled") return "Task successfully scheduled.";
    if (state == "Completed") return "Job completed successfully.";
    if (state == "Failed" && !t.messages.empty()) return t.messages.back().value("Message", "Job failed.");
    return "Job in progress.";
}

}  // namespace

json dell_job_view(const UpdateTask& t, double now, const std::string& job_uri) {
    const std::string state = dell_job_state(t, now);
    json body = {{"@odata.id", job_uri},
                 {"@odata.type", "#DellJob.v1_0_0.DellJob"},
                 {"Id", t.id},
                 {"Name", "Firmware Update: " + (t.component.empty() ? std::string("(image)") : t.component)},
                 {"JobType", "FirmwareUpdate"},
                 {"JobState", state},
                 {"PercentComplete", state == "Completed"   ? 100
                                     : state == "Scheduled" ? 0
                                                            : progress_at(t, now).percent},
                 {"Message", dell_job_message(t, state)},
                 {"StartTime", iso8601(t.created)}};
    if (t.done && !t.scheduled) body["CompletionTime"] = iso8601(t.ended);
    return body;
}

json dell_task_view(const UpdateTask& t, double now, const std::string& task_uri, const std::string& monitor_uri) {
    json body = task_view(t, now, task_uri, monitor_uri);
    json job = dell_job_view(t, now, "");
    job.erase("@odata.id");
    body["Oem"] = {{"Dell", std::move(job)}};
    return body;
}

json to_json(const UpdateTask& t) {
    return {{"id", t.id},
            {"kind", t.kind},
            {"action_uri", t.action_uri},
            {"image", t.image},
            {"reset_type", t.reset_type},
            {"http_operation", t.http_operation},
            {"payload", t.payload},
            {"requested_targets", t.requested_targets},
            {"apply_time", t.apply_time},
            {"created", t.created},
            {"started", t.started},
            {"duration", t.duration},
            {"fail", t.fail},
            {"restart_mid", t.restart_mid},
            {"restarted", t.restarted},
            {"done", t.done},
            {"ended", t.ended},
            {"outcome", t.outcome},
            {"scheduled", t.scheduled},
            {"purge", t.purge},
            {"seen", t.seen},
            {"messages", t.messages},
            {"component", t.component},
            {"version", t.version},
            {"sha256", t.sha256},
            {"targets", t.targets}};
}

Result<UpdateTask> update_task_from_json(const json& j) {
    UpdateTask t;
    try {
        t.id = j.at("id").get<std::string>();
        t.kind = j.at("kind").get<std::string>();
        t.action_uri = j.at("action_uri").get<std::string>();
        t.image = j.at("image").get<std::string>();
        t.requested_targets = j.at("requested_targets").get<std::vector<std::string>>();
        t.apply_time = j.at("apply_time").get<std::string>();
        t.created = j.at("created").get<double>();
        t.started = j.at("started").get<double>();
        t.duration = j.at("duration").get<double>();
        t.fail = j.at("fail").get<bool>();
        t.restart_mid = j.at("restart_mid").get<bool>();
        t.restarted = j.at("restarted").get<bool>();
        t.done = j.at("done").get<bool>();
        t.ended = j.at("ended").get<double>();
        t.outcome = j.at("outcome").get<std::string>();
        // Later fields: absent from state files written before them.
        t.scheduled = j.value("scheduled", false);
        t.reset_type = j.value("reset_type", "");
        t.http_operation = j.value("http_operation", "POST");
        t.payload = j.value("payload", "");
        t.purge = j.value("purge", false);
        t.seen = j.value("seen", false);
        t.messages = j.at("messages").get<std::vector<json>>();
        t.component = j.at("component").get<std::string>();
        t.version = j.at("version").get<std::string>();
        t.sha256 = j.at("sha256").get<std::string>();
        t.targets = j.at("targets").get<std::vector<std::string>>();
    } catch (const json::exception& e) {
        return make_error("bmc", "bmc.state_malformed",
                          std::string("an update task in the state file is malformed: ") + e.what());
    }
    return t;
}

}  // namespace kiln::bmc
