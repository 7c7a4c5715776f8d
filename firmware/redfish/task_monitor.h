// Following a Redfish long operation to its end (DSP0266 "Asynchronous
// operations"): a 202 Accepted with a Location task monitor (or a Task
// resource), polled while it answers 202 or a running TaskState, honouring
// Retry-After, until the task ends. Every DSP0266 TaskState is handled:
//   running, keep polling: New Starting Running Pending Stopping Cancelling
//                          Service Suspended Interrupted
//   done:    Completed, success only with TaskStatus OK or Warning (a
//            Completed task with Critical status is a failure: seen on
//            stuck Dell BIOS jobs)
//   failed:  Exception Killed Cancelled (and any unknown state)
//   staged:  Dell's Scheduled (as TaskState, or Oem.Dell.JobState of a
//            Running task): the update waits for a host reboot; the result
//            has state "Scheduled" and the caller resets and reads back
// States compare case-insensitively. A monitor that answers 404 after
// polls saw it running (a purged Dell job) ends with state "Purged": the
// outcome is unknown, the caller's read-back decides.
// Dell iDRAC: an update task stands for a job in the iDRAC job queue
// (Managers/<id>/Oem/Dell/Jobs/JID_...); after the host reset that a
// Scheduled job waits for, the job (JobState, PercentComplete, Message) is
// what tells whether the update ran.
// Connection errors and 401s while polling are expected when the BMC
// restarts after its own update: they are waited out (the session logs in
// again) until `timeout`.
//
// Errors, domain "redfish":
//   redfish.task_failed    the task ended badly; the message has its
//                          TaskState, TaskStatus and MessageIds
//   redfish.task_timeout   still running at `timeout` (transient)
//   redfish.stopped        the wait was cut short
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/redfish/redfish_client.h"

namespace kiln::redfish {

enum class TaskPhase { Running, Succeeded, Failed };

// Classifies a TaskState/TaskStatus pair.
TaskPhase task_phase(const std::string& state, const std::string& status);

struct TaskOptions {
    std::chrono::milliseconds poll_interval{2000};  // when the BMC gives no Retry-After
    std::chrono::milliseconds max_poll_interval{30000};
    std::chrono::milliseconds timeout{std::chrono::minutes(30)};
    // Called on each poll with the task's state and percent (-1 unknown).
    std::function<void(const std::string& state, int percent)> progress;
    // follow_dell_job: a Scheduled job ends the wait (state "Scheduled"):
    // it runs only at the next host reset.
    bool stop_at_scheduled = false;
    // The clock polls are paced by (tests drive it); unset: steady_clock.
    std::function<std::chrono::steady_clock::time_point()> now;
};

struct TaskResult {
    std::string monitor;  // the URI polled
    std::string state = "Completed";
    std::string status;                 // TaskStatus, "" when the BMC gave none
    std::vector<std::string> messages;  // MessageIds (and Message texts) seen at the end
    int polls = 0;
    nlohmann::json final_body;  // the last body (the operation's result when the monitor returned it)
};

// One task followed a poll at a time, for callers that park between polls
// (engine::StageContext::park) rather than hold a thread asleep: step()
// polls once; then done(), or wait() says how long until the next poll
// (Retry-After, else poll_interval). save()/restore() carry the poll across
// a park (in memory: its deadline is a steady-clock time). follow_task is
// this, run to the end with the client's wait between polls.
class TaskPoll {
public:
    using Clock = std::chrono::steady_clock;
    // From the reply that started the operation; done() at once for a
    // 200/204 without a task. Errors as follow_task.
    static Result<TaskPoll> start(Client& client, const Response& accepted, const TaskOptions& options);
    static TaskPoll of_uri(const std::string& uri, const TaskOptions& options);
    static Result<TaskPoll> restore(const nlohmann::json& saved, const TaskOptions& options);
    nlohmann::json save() const;

    bool done() const { return done_; }
    std::chrono::milliseconds wait() const { return next_; }
    const TaskResult& result() const { return result_; }
    // One poll, at once (the caller has waited wait()). Errors as follow_task.
    Status step(Client& client);

private:
    TaskPoll(std::string uri, std::chrono::milliseconds first_wait, const TaskOptions& options);
    // The wait before the next poll of a running task: `floor` (Retry-After,
    // else poll_interval), or half the time its PercentComplete says is
    // left, up to max_poll_interval. A 60 s task is polled about 15 times,
    // not 60, and its end is still seen within `floor` of when it comes
    // (5,000 BMCs polled every second were the bulk of a firmware wave's
    // requests: bench/redfish part s).
    std::chrono::milliseconds paced(std::chrono::milliseconds floor, int percent);
    TaskOptions options_;
    TaskResult result_;
    std::chrono::milliseconds next_{0};
    Clock::time_point deadline_;
    int first_percent_ = -1;        // the first PercentComplete in (0, 100) seen
    Clock::time_point first_seen_;  // ... and when
    std::string last_error_;
    bool done_ = false;
};

// `accepted` is the 202 (or 2xx with a Task body) that started the
// operation. A 200/204 with no task is done already.
Result<TaskResult> follow_task(Client& client, const Response& accepted, const TaskOptions& options = {});

// Polls a known task or task monitor URI (e.g. one found running at start).
Result<TaskResult> follow_task_uri(Client& client, const std::string& uri, const TaskOptions& options = {});

// The iDRAC job behind a task: the body's Oem.Dell.Id, else the monitor's
// last segment when it is a JID_ (iDRAC names tasks after their jobs); ""
// when neither.
std::string dell_job_id(const TaskResult& task);

// DellJob JobState: Completed; Failed, CompletedWithErrors, RebootFailed;
// anything else (New, Scheduled, Running, Downloading, RebootPending ...)
// is still on its way. Case-insensitive.
enum class JobPhase { Waiting, Completed, Failed };
JobPhase job_phase(const std::string& state);

// Polls an iDRAC job to its end. Completed: the result (state, the job's
// Message in `messages`); Failed: redfish.task_failed with JobState and
// Message; 404 (cleared from the queue): state "Purged", the caller reads
// the version back. Transient errors and 5xx are waited out until
// `options.timeout`.
Result<TaskResult> follow_dell_job(Client& client, const std::string& job_uri, const TaskOptions& options = {});

// One poll of follow_dell_job's, for callers that park between polls:
// `result` (monitor, state, polls, messages) is updated; true once the job
// has ended well (Completed, Purged, or Scheduled with stop_at_scheduled),
// false while it waits or the BMC is busy (`last_error` says why); the
// same errors as follow_dell_job, less the timeout (the caller's).
Result<bool> poll_dell_job(Client& client, const std::string& job_uri, const TaskOptions& options, TaskResult& result,
                           std::string& last_error);

// redfish.task_timeout for a job still `state` after `timeout` (transient).
Error job_timeout_error(const std::string& job_uri, const std::string& state, std::chrono::milliseconds timeout,
                        const std::string& last_error);

}  // namespace kiln::redfish
