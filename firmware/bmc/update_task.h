// One firmware update task of an emulated BMC (SimpleUpdate or multipart
// push), and how it looks at a given time. Progress is a function of the
// wall clock (seconds since the epoch), so it is evaluated when a request
// comes, survives an emulator restart, and tests drive it with a fake clock.
//
// Timeline: created -> (image in) started -> started + duration: done.
// Before the image is in the task is New; then New for the first 10 % of
// the duration, Running with PercentComplete, and at the end Completed or
// Exception (docs/kiln-bmc.md, "Tasks").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/core/result.h"

namespace kiln::bmc {

// The kind of a task a reset runs (BmcConfig::reset_task_seconds).
inline constexpr const char* kResetTaskKind = "ComputerSystem.Reset";

struct UpdateTask {
    std::string id;
    std::string kind;        // "SimpleUpdate", "MultipartHttpPushUpdate", kResetTaskKind
    std::string action_uri;  // what was POSTed to
    std::string image;       // the ImageURI without credentials or query, or the pushed file name
    std::string reset_type;  // a reset's task: the ResetType asked for
    // A task that follows a write done when it was asked for
    // (BmcConfig::media_task_seconds): its method and JSON body, as the
    // Task's Payload shows them.
    std::string http_operation = "POST";
    std::string payload;
    std::vector<std::string> requested_targets;
    std::string apply_time = "Immediate";  // or "OnReset"
    double created = 0;
    double started = -1;  // the image is in; < 0 while it downloads
    double duration = 5;
    bool fail = false;         // fault: ends in Exception
    bool restart_mid = false;  // fault: the BMC restarts half way
    bool restarted = false;
    bool done = false;  // the end was reached and its effects applied
    double ended = -1;
    std::string outcome;  // "Completed" or "Exception" once done
    // Dell: done with the transfer, the update waits for the next host
    // reset (the task stays Running, its job Scheduled).
    bool scheduled = false;
    bool purge = false;  // fault: once polled, the task is gone (404)
    bool seen = false;   // polled at least once
    std::vector<nlohmann::json> messages;
    std::string component, version, sha256;  // from the image
    std::vector<std::string> targets;        // FirmwareInventory members
};

// The task only follows an operation that took effect when it was asked
// for (a reset, a virtual media or boot override write): it ends Completed.
bool follows_only(const UpdateTask& task);

struct TaskProgress {
    std::string state;  // New, Running, Completed, Exception
    int percent = 0;
};

TaskProgress progress_at(const UpdateTask& task, double now);

// The Task resource at `now`.
nlohmann::json task_view(const UpdateTask& task, double now, const std::string& task_uri,
                         const std::string& monitor_uri);

// iDRAC's job for a task (DellJob: JobState, PercentComplete, Message):
// Downloading, Running, Scheduled, Completed or Failed.
nlohmann::json dell_job_view(const UpdateTask& task, double now, const std::string& job_uri);
// The task with its Oem.Dell job, as iDRAC shows it.
nlohmann::json dell_task_view(const UpdateTask& task, double now, const std::string& task_uri,
                              const std::string& monitor_uri);

nlohmann::json to_json(const UpdateTask& task);
// Errors: "bmc.state_malformed" naming the field.
Result<UpdateTask> update_task_from_json(const nlohmann::json& j);

// ISO 8601 UTC for wall seconds.
std::string iso8601(double wall_seconds);

}  // namespace kiln::bmc
