// BmcState's UpdateService: SimpleUpdate and multipart push create update
// tasks (update_task.h) that progress with the wall clock; advance() moves
// them on at each request and applies what they finish. Split from
// bmc_state.cc to keep each file about one thing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "firmware/bmc/bios_settings.h"
#include "firmware/bmc/bmc_state.h"
#include "firmware/bmc/firmware_image.h"
#include "firmware/bmc/firmware_inventory.h"
#include "firmware/bmc/json_reader.h"

namespace kiln::bmc {

using nlohmann::json;

namespace {

const std::string kSimpleUpdate = "UpdateService.SimpleUpdate";
const std::string kPushUpdate = "UpdateService.MultipartHttpPushUpdate";
const char* kDefaultPushUri = "/redfish/v1/UpdateService/update-multipart";

bool starts_with(const std::string& text, const std::string& prefix) {
    return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

BmcResponse json_answer(int status, const json& body) {
    BmcResponse r;
    r.status = status;
    r.body = dump_json(body);
    r.headers.emplace_back("ETag", content_etag(body));
    return r;
}

std::string target_names(const std::vector<std::string>& targets) {
    std::string out;
    for (const auto& t : targets) out += (out.empty() ? "" : ", ") + t;
    return out.empty() ? "(none)" : out;
}

// "Targets": [string...]; a message when it is something else.
std::optional<RedfishMessage> read_targets(const json& params, const std::string& action,
                                           std::vector<std::string>* out) {
    auto it = params.find("Targets");
    if (it == params.end() || it->is_null()) return std::nullopt;
    if (!it->is_array()) return messages::action_parameter_value_format_error(it->dump(), "Targets", action);
    for (const auto& t : *it) {
        if (!t.is_string()) return messages::action_parameter_value_format_error(t.dump(), "Targets", action);
        out->push_back(t.get<std::string>());
    }
    return std::nullopt;
}

std::optional<RedfishMessage> read_apply_time(const json& params, const std::string& action, std::string* out) {
    auto it = params.find("@Redfish.OperationApplyTime");
    if (it == params.end()) return std::nullopt;
    if (!it->is_string() || (*it != "Immediate" && *it != "OnReset")) {
        return messages::action_parameter_value_not_in_list(it->dump(), "@Redfish.OperationApplyTime", action);
    }
    *out = it->get<std::string>();
    return std::nullopt;
}

// The tree's first Manager (iDRAC's own), if any.
std::optional<std::string> first_manager(const ResourceStore& store) {
    auto managers = store.resolve("/redfish/v1/Managers");
    if (!managers) return std::nullopt;
    const json& members = store.body(*managers).value("Members", json::array());
    if (!members.is_array() || members.empty()) return std::nullopt;
    return resolve_link(store, members[0]);
}

}  // namespace

double BmcState::now() const {
    if (config_.wall_clock) return config_.wall_clock();
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

void BmcState::seed_update_service() {
    vendor_ = config_.vendor.value_or(VendorMode::Generic);
    if (vendor_ == VendorMode::Dell)
        if (auto first = first_manager(store_)) dell_jobs_uri_ = *first + "/Oem/Dell/Jobs";
    tasks_uri_ = "/redfish/v1/TaskService/Tasks";
    if (auto service = store_.resolve("/redfish/v1/TaskService")) {
        const json& body = store_.body(*service);
        if (body.contains("Tasks")) {
            if (auto canon = resolve_link(store_, body["Tasks"])) tasks_uri_ = *canon;
        }
    }
    monitors_uri_ = "/redfish/v1/TaskService/TaskMonitors";
    // Task ids go on from the tree's highest number.
    const std::string prefix = lower_ascii(tasks_uri_) + "/";
    for (const auto& uri : store_.uris()) {
        if (!starts_with(lower_ascii(uri), prefix)) continue;
        std::string id = uri.substr(prefix.size());
        if (starts_with(id, "JID_")) id = id.substr(4);
        if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos && id.size() < 10) {
            next_task_ = std::max(next_task_, std::stoul(id) + 1);
        }
    }
    auto update = store_.resolve("/redfish/v1/UpdateService");
    if (!update) return;
    json body = store_.body(*update);
    bool seeded = false;
    if (body.contains("MultipartHttpPushUri") && body["MultipartHttpPushUri"].is_string()) {
        push_uri_ = normalize_uri(body["MultipartHttpPushUri"].get<std::string>());
    } else {
        push_uri_ = kDefaultPushUri;
        body["MultipartHttpPushUri"] = push_uri_;
        seeded = true;
    }
    // SimpleUpdate takes @Redfish.OperationApplyTime: say so, as DSP0266
    // asks of a service that does (trees that say otherwise are kept).
    if (body.contains("Actions") && body["Actions"].is_object() &&
        body["Actions"].contains("#UpdateService.SimpleUpdate") &&
        body["Actions"]["#UpdateService.SimpleUpdate"].is_object() &&
        !body["Actions"]["#UpdateService.SimpleUpdate"].contains("@Redfish.OperationApplyTimeSupport")) {
        body["Actions"]["#UpdateService.SimpleUpdate"]["@Redfish.OperationApplyTimeSupport"] = {
            {"@odata.type", "#Settings.v1_3_5.OperationApplyTimeSupport"},
            {"SupportedValues", {"Immediate", "OnReset"}}};
        seeded = true;
    }
    if (seeded) store_.seed(*update, std::move(body));
    // The ComputerSystem a power backend drives: the first one.
    if (auto systems = store_.resolve("/redfish/v1/Systems")) {
        const json& s = store_.body(*systems);
        if (s.contains("Members") && s["Members"].is_array() && !s["Members"].empty()) {
            if (auto first = resolve_link(store_, s["Members"][0])) power_system_uri_ = *first;
        }
    }
}

BmcState::~BmcState() {
    stopping_ = true;
    wait_downloads();
}

void BmcState::wait_downloads() {
    std::vector<std::thread> workers;
    {
        std::lock_guard<std::mutex> lock(mu_);
        workers.swap(workers_);
    }
    for (auto& w : workers) {
        if (w.joinable()) w.join();
    }
}

std::optional<BmcResponse> BmcState::admit_upload(const std::string& method, const std::string& uri,
                                                  const HeaderMap& headers) {
    std::lock_guard<std::mutex> lock(mu_);
    if (method != "POST" || push_uri_.empty() || lower_ascii(normalize_uri(uri)) != lower_ascii(push_uri_)) {
        return error_response(415, messages::unsupported_media_type());
    }
    BmcRequest head;
    head.method = method;
    head.path = uri;
    head.headers = headers;
    // No spooling for whom the answer is 401 anyway.
    if (auto refusal = authenticate(head, push_uri_)) return refusal;
    return std::nullopt;
}

BmcResponse BmcState::simple_update(const BmcRequest& request, const std::string& action_uri,
                                    const std::string& resource_uri) {
    // bmcweb takes SimpleUpdate over TFTP only, where built with it: an
    // HTTP(S) image is refused, and the client must push it (multipart).
    if (vendor_ == VendorMode::OpenBmc) {
        return error_response(400, messages::action_parameter_not_supported("TransferProtocol", kSimpleUpdate));
    }
    BmcResponse refusal;
    auto body = parse_body(request, &refusal);
    if (!body) return refusal;
    static const std::vector<std::string> known = {"ImageURI",   "TransferProtocol", "Targets",
                                                   "Username",   "Password",         "@Redfish.OperationApplyTime",
                                                   "ForceUpdate"};
    for (const auto& [key, value] : body->items()) {
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            return error_response(400, messages::action_parameter_not_supported(key, kSimpleUpdate));
        }
    }
    if (!body->contains("ImageURI"))
        return error_response(400, messages::action_parameter_missing(kSimpleUpdate, "ImageURI"));
    const json& image = (*body)["ImageURI"];
    if (!image.is_string() || image.get<std::string>().empty()) {
        return error_response(400,
                              messages::action_parameter_value_format_error(image.dump(), "ImageURI", kSimpleUpdate));
    }
    std::string uri = image.get<std::string>();
    std::string protocol;
    if (body->contains("TransferProtocol")) {
        const json& p = (*body)["TransferProtocol"];
        if (!p.is_string()) {
            return error_response(
                400, messages::action_parameter_value_format_error(p.dump(), "TransferProtocol", kSimpleUpdate));
        }
        protocol = p.get<std::string>();
        // The action's allowable values: inline, else its ActionInfo.
        json allowed = json::array();
        const json& service = store_.body(resource_uri);
        const json action =
            service.value("Actions", json::object()).value("#UpdateService.SimpleUpdate", json::object());
        if (action.contains("TransferProtocol@Redfish.AllowableValues")) {
            allowed = action["TransferProtocol@Redfish.AllowableValues"];
        } else if (action.contains("@Redfish.ActionInfo")) {
            if (auto info = resolve_link(store_, json{{"@odata.id", action["@Redfish.ActionInfo"]}})) {
                for (const auto& param : store_.body(*info).value("Parameters", json::array())) {
                    if (param.value("Name", "") == "TransferProtocol")
                        allowed = param.value("AllowableValues", json::array());
                }
            }
        }
        if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), protocol) == allowed.end()) {
            return error_response(
                400, messages::action_parameter_value_not_in_list(protocol, "TransferProtocol", kSimpleUpdate));
        }
        if (protocol != "HTTP" && protocol != "HTTPS") {
            return error_response(
                400, messages::action_parameter_not_supported("TransferProtocol " + protocol, kSimpleUpdate));
        }
        // DSP0266: an ImageURI without a scheme takes it from TransferProtocol.
        if (uri.find("://") == std::string::npos) uri = lower_ascii(protocol) + "://" + uri;
    }
    const std::string lower = lower_ascii(uri.substr(0, 8));
    const bool http = starts_with(lower, "http://"), https = starts_with(lower, "https://");
    if (!http && !https) {
        return error_response(
            400, messages::action_parameter_value_format_error(redact_uri(uri), "ImageURI", kSimpleUpdate));
    }
    if (!protocol.empty() && (protocol == "HTTPS") != https) {
        return error_response(
            400, messages::action_parameter_value_not_in_list(protocol, "TransferProtocol", kSimpleUpdate));
    }
    UpdateTask task;
    task.kind = "SimpleUpdate";
    task.action_uri = action_uri;
    task.image = redact_uri(uri);
    if (auto err = read_targets(*body, kSimpleUpdate, &task.requested_targets)) return error_response(400, *err);
    for (const auto& t : task.requested_targets) {
        if (!store_.resolve(t)) {
            return error_response(400, messages::action_parameter_value_not_in_list(t, "Targets", kSimpleUpdate));
        }
    }
    if (auto err = read_apply_time(*body, kSimpleUpdate, &task.apply_time)) return error_response(400, *err);
    DownloadOptions options = config_.download;
    for (const char* field : {"Username", "Password"}) {
        if (body->contains(field) && !(*body)[field].is_string()) {
            return error_response(400, messages::action_parameter_value_format_error("(hidden)", field, kSimpleUpdate));
        }
    }
    options.user = body->value("Username", "");
    options.password = body->value("Password", "");

    BmcResponse accepted = accept_task(std::move(task));
    if (accepted.status != 202) return accepted;
    const std::string id = tasks_.back().id;
    workers_.emplace_back(&BmcState::download, this, id, uri, std::move(options));
    return accepted;
}

void BmcState::download(const std::string& task_id, const std::string& uri, const DownloadOptions& options) {
    auto image = download_image(uri, options, stopping_);
    std::lock_guard<std::mutex> lock(mu_);
    UpdateTask* task = find_task(task_id);
    if (!task || task->done) {
        if (image) std::filesystem::remove(image->path);
        return;
    }
    const double t = now();
    if (!image) {
        // Cancelled by shutdown: left undone, the next start ends it as interrupted.
        if (image.error().code == "bmc.cancelled") return;
        fail_task(*task, messages::transfer_failed(task->image, image.error().message), t);
    } else {
        start_task(*task, *image, t);
        std::error_code ec;
        std::filesystem::remove(image->path, ec);
    }
    commit();
    undo_.clear();
}

BmcResponse BmcState::push_update(const BmcRequest& request) {
    if (!request.multipart) return error_response(415, messages::unsupported_media_type());
    const MultipartBody& mp = *request.multipart;
    json params = json::object();
    if (mp.has_parameters) {
        auto parsed = parse_json(mp.parameters, JsonLimits{config_.max_body_bytes, 32}, "UpdateParameters");
        if (!parsed) return error_response(400, messages::malformed_json(parsed.error().message));
        if (!parsed->is_object())
            return error_response(400, messages::malformed_json("UpdateParameters is not a JSON object"));
        params = std::move(*parsed);
    }
    if (mp.file_path.empty()) return error_response(400, messages::action_parameter_missing(kPushUpdate, "UpdateFile"));
    UpdateTask task;
    task.kind = "MultipartHttpPushUpdate";
    task.action_uri = push_uri_;
    task.image = mp.file_name.empty() ? "UpdateFile" : mp.file_name;
    if (auto err = read_targets(params, kPushUpdate, &task.requested_targets)) return error_response(400, *err);
    for (const auto& t : task.requested_targets) {
        if (!store_.resolve(t))
            return error_response(400, messages::action_parameter_value_not_in_list(t, "Targets", kPushUpdate));
    }
    if (auto err = read_apply_time(params, kPushUpdate, &task.apply_time)) return error_response(400, *err);
    ReceivedImage image;
    image.path = mp.file_path;
    image.sha256 = mp.file_sha256;
    image.size = mp.file_size;
    image.head = mp.file_head;
    BmcResponse accepted = accept_task(std::move(task));
    if (accepted.status != 202) return accepted;
    start_task(tasks_.back(), image, now());
    if (auto failed = commit()) return *failed;
    return task_get(monitors_uri_ + "/" + tasks_.back().id, now(), false).value();
}

BmcResponse BmcState::accept_task(UpdateTask task, bool faults) {
    // iDRAC names a task after its job.
    task.id = (vendor_ == VendorMode::Dell ? "JID_" : "") + std::to_string(next_task_++);
    task.created = now();
    if (faults) {  // the update faults are for update tasks
        task.purge = faults_.take_purge_task();
        task.duration = config_.task_seconds;
        task.fail = faults_.take_task_failure();
        task.restart_mid = faults_.take_restart_mid_update();
    }
    tasks_.push_back(std::move(task));
    if (auto failed = commit()) {
        tasks_.pop_back();
        return *failed;
    }
    return *task_get(monitors_uri_ + "/" + tasks_.back().id, now(), false);
}

void BmcState::start_task(UpdateTask& task, const ReceivedImage& image, double t) {
    task.sha256 = image.sha256;
    auto header = parse_image_header(image.head);
    if (!header) {
        fail_task(task, messages::verification_failed(task.image, header.error().message), t);
        return;
    }
    task.component = header->component;
    task.version = header->version;
    auto targets = update_targets(store_, header->component, task.requested_targets);
    if (!targets) {
        if (targets.error().code == "bmc.no_targets") {
            fail_task(task, messages::no_targets_determined(task.image), t);
        } else {
            RedfishMessage why = messages::apply_failed(task.image, target_names(task.requested_targets));
            why.message += " " + targets.error().message + ".";
            fail_task(task, why, t);
        }
        return;
    }
    task.targets = *targets;
    for (const auto& target : task.targets)
        task.messages.push_back(message_json(messages::target_determined(task.image, target)));
    task.started = t;
}

void BmcState::fail_task(UpdateTask& task, const RedfishMessage& why, double t) {
    task.messages.push_back(message_json(why));
    task.outcome = "Exception";
    task.done = true;
    task.ended = t;
}

bool BmcState::advance(double t) {
    bool changed = false;
    if (!post_system_.empty() && t >= post_until_) {
        // POST is over: the boot it leads to uses up a one-time override.
        json system = store_.body(post_system_);
        if (system.contains("Boot") && system["Boot"].value("BootSourceOverrideEnabled", "") == "Once") {
            system["Boot"]["BootSourceOverrideEnabled"] = "Disabled";
            change(post_system_, std::move(system));
        }
        apply_bios_at_post(post_system_, iso8601(post_until_));
        apply_pending_updates(post_until_);  // the updates staged OnReset run in POST
        post_system_.clear();
        changed = true;
    }
    for (auto& task : tasks_) {
        if (task.done || task.started < 0) continue;
        const double mid = task.started + task.duration / 2, end = task.started + task.duration;
        if (task.restart_mid && !task.restarted && t >= mid) {
            task.restarted = true;
            restart_bmc(mid);
            changed = true;
        }
        if (t >= end) {
            finish_task(task, end);
            changed = true;
        }
    }
    return changed;
}

void BmcState::finish_task(UpdateTask& task, double at) {
    if (follows_only(task)) {  // the operation itself happened when it was asked for
        task.messages.push_back(message_json(messages::success()));
        task.outcome = "Completed";
        task.done = true;
        task.ended = at;
        return;
    }
    if (task.fail) {
        fail_task(task, messages::apply_failed(task.image, target_names(task.targets)), at);
        return;
    }
    // iDRAC applies anything but its own firmware at the next host reset,
    // whatever apply time was asked: the job waits Scheduled.
    const bool dell_staged = vendor_ == VendorMode::Dell &&
                             !std::any_of(task.targets.begin(), task.targets.end(), [&](const std::string& t) {
                                 return component_class(store_.body(t)) == "bmc";
                             });
    if (task.apply_time == "OnReset" || dell_staged) {
        task.scheduled = dell_staged;
        for (const auto& target : task.targets)
            task.messages.push_back(message_json(messages::await_to_activate(task.image, target)));
        pending_updates_.push_back({{"task", task.id},
                                    {"component", task.component},
                                    {"version", task.version},
                                    {"sha256", task.sha256},
                                    {"targets", task.targets}});
    } else {
        apply_update(task, at);
        for (const auto& target : task.targets)
            task.messages.push_back(message_json(messages::update_successful(task.image, target)));
    }
    task.outcome = "Completed";
    task.done = true;
    task.ended = at;
}

void BmcState::apply_update(const UpdateTask& task, double at) {
    bool bmc = false;
    for (const auto& target : task.targets) {
        auto canon = store_.resolve(target);
        if (!canon) continue;
        VersionChange vc = apply_version(
            store_, *canon, task.version,
            [this](const std::string& cur, const std::string& v) { return in_vendor_form(vendor_, cur, v); });
        for (auto& [uri, body] : vc.bodies) change(uri, std::move(body));
        bmc = bmc || vc.bmc;
    }
    applied_updates_.push_back({{"task", task.id},
                                {"component", task.component},
                                {"version", task.version},
                                {"sha256", task.sha256},
                                {"targets", task.targets},
                                {"applied_at", iso8601(at)}});
    if (bmc) restart_bmc(at);
}

void BmcState::apply_pending_updates(double t) {
    auto pending = std::move(pending_updates_);
    pending_updates_.clear();
    for (const auto& p : pending) {
        UpdateTask staged;
        staged.id = p.value("task", "");
        staged.component = p.value("component", "");
        staged.version = p.value("version", "");
        staged.sha256 = p.value("sha256", "");
        staged.targets = p.value("targets", std::vector<std::string>{});
        apply_update(staged, t);
        if (UpdateTask* task = find_task(staged.id); task && task->scheduled) {
            task->scheduled = false;  // the job ran in this POST
            task->ended = t;
            for (const auto& target : task->targets)
                task->messages.push_back(message_json(messages::update_successful(task->image, target)));
        }
    }
}

void BmcState::restart_bmc(double at) {
    sessions_.clear();
    unavailable_until_ = std::max(unavailable_until_, at + config_.restart_seconds);
}

UpdateTask* BmcState::find_task(const std::string& id) {
    for (auto& t : tasks_) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

json BmcState::tasks_collection_view() {
    json body = {{"@odata.type", "#TaskCollection.TaskCollection"}, {"Name", "Task Collection"}};
    json members = json::array();
    if (auto canon = store_.resolve(tasks_uri_)) {
        body = store_.view(*canon);
        body.erase("@odata.etag");
        if (body.contains("Members") && body["Members"].is_array()) members = body["Members"];
    }
    body["@odata.id"] = tasks_uri_;
    for (const auto& t : tasks_) members.push_back({{"@odata.id", tasks_uri_ + "/" + t.id}});
    body["Members@odata.count"] = members.size();
    body["Members"] = std::move(members);
    return body;
}

std::optional<BmcResponse> BmcState::task_get(const std::string& uri, double t, bool polled) {
    const std::string luri = lower_ascii(uri);
    if (luri == lower_ascii(tasks_uri_)) return json_answer(200, tasks_collection_view());
    const bool task_uri = starts_with(luri, lower_ascii(tasks_uri_) + "/");
    const bool monitor_uri = starts_with(luri, lower_ascii(monitors_uri_) + "/");
    if (!task_uri && !monitor_uri) return std::nullopt;
    const std::string id = uri.substr((task_uri ? tasks_uri_ : monitors_uri_).size() + 1);
    UpdateTask* task = find_task(id);
    if (!task) {
        if (monitor_uri) return error_response(404, messages::resource_missing_at_uri(uri));
        return std::nullopt;  // maybe one of the tree's own tasks
    }
    // Fault purge_tasks: gone once a client saw it (as iDRAC clears tasks).
    if (task->purge && task->seen) return error_response(404, messages::resource_missing_at_uri(uri));
    task->seen = task->seen || polled;
    const std::string monitor = monitors_uri_ + "/" + task->id;
    json body = vendor_ == VendorMode::Dell ? dell_task_view(*task, t, tasks_uri_ + "/" + task->id, monitor)
                                            : task_view(*task, t, tasks_uri_ + "/" + task->id, monitor);
    if (task_uri || (task->done && !task->scheduled)) return json_answer(200, body);
    BmcResponse r = json_answer(202, body);
    r.headers.emplace_back("Location", monitor);
    r.headers.emplace_back("Retry-After", "1");
    return r;
}

std::optional<BmcResponse> BmcState::dell_job_get(const std::string& uri, double t) {
    if (dell_jobs_uri_.empty()) return std::nullopt;
    const std::string luri = lower_ascii(uri), base = lower_ascii(dell_jobs_uri_);
    if (luri == base) {
        json members = json::array();
        for (const auto& task : tasks_) members.push_back({{"@odata.id", dell_jobs_uri_ + "/" + task.id}});
        return json_answer(200, {{"@odata.id", dell_jobs_uri_},
                                 {"@odata.type", "#DellJobCollection.DellJobCollection"},
                                 {"Name", "JobQueue"},
                                 {"Members@odata.count", members.size()},
                                 {"Members", members}});
    }
    if (!starts_with(luri, base + "/")) return std::nullopt;
    const std::string id = uri.substr(dell_jobs_uri_.size() + 1);
    UpdateTask* task = find_task(id);
    if (!task) return error_response(404, messages::resource_missing_at_uri(uri));
    return json_answer(200, dell_job_view(*task, t, dell_jobs_uri_ + "/" + task->id));
}

std::optional<BmcResponse> BmcState::dell_job_action(const BmcRequest& request, const std::string& uri) {
    if (dell_jobs_uri_.empty()) return std::nullopt;
    // <manager>/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue
    // {"JobID": "JID_CLEARALL"}: every job that is not running goes, and an
    // update waiting Scheduled for a host reset is cancelled with it (as on
    // iDRAC: clearing the queue while an update waits loses the update).
    // {"JobID": "JID_..."} deletes that one job. Our model of iDRAC from its
    // documentation, not captured traffic; the refusals use Base messages.
    const std::string manager = dell_jobs_uri_.substr(0, dell_jobs_uri_.size() - std::string("/Oem/Dell/Jobs").size());
    const std::string action = "DellJobService.DeleteJobQueue";
    if (lower_ascii(uri) != lower_ascii(manager + "/Oem/Dell/DellJobService/Actions/" + action)) return std::nullopt;
    BmcResponse refusal;
    auto body = parse_body(request, &refusal);
    if (!body) return refusal;
    if (!body->contains("JobID")) return error_response(400, messages::action_parameter_missing(action, "JobID"));
    if (!(*body)["JobID"].is_string())
        return error_response(400,
                              messages::action_parameter_value_not_in_list((*body)["JobID"].dump(), "JobID", action));
    const std::string job = (*body)["JobID"].get<std::string>();
    const bool all = job == "JID_CLEARALL" || job == "JID_CLEARALL_FORCE";
    const double t = now();
    bool found = false;
    std::vector<std::string> deleted;
    for (const auto& task : tasks_) {
        if (!all && task.id != job) continue;
        found = true;
        const std::string state = progress_at(task, t).state;
        // A running job stays unless forced.
        if (!task.done && (state == "Running" || state == "New") && job != "JID_CLEARALL_FORCE") continue;
        deleted.push_back(task.id);
    }
    if (!all && !found) return error_response(400, messages::action_parameter_value_not_in_list(job, "JobID", action));
    auto gone = [&](const std::string& id) { return std::find(deleted.begin(), deleted.end(), id) != deleted.end(); };
    tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(), [&](const UpdateTask& task) { return gone(task.id); }),
                 tasks_.end());
    pending_updates_.erase(std::remove_if(pending_updates_.begin(), pending_updates_.end(),
                                          [&](const json& p) { return gone(p.value("task", "")); }),
                           pending_updates_.end());
    if (auto failed = commit()) return *failed;
    return json_answer(200, {{"@Message.ExtendedInfo", json::array({message_json(messages::success())})}});
}

json BmcState::emulator_state() const {
    json tasks = json::array();
    for (const auto& t : tasks_) tasks.push_back(to_json(t));
    return {{"tasks", tasks},
            {"next_task", next_task_},
            {"pending_updates", pending_updates_},
            {"updates", applied_updates_},
            {"direct_bios_pending", direct_bios_pending_},
            {"last_boot", last_boot_},
            {"resets", resets_},
            {"unavailable_until", unavailable_until_},
            {"post", {{"system", post_system_}, {"until", post_until_}}}};
}

Status BmcState::load_emulator_state(const json& j) {
    if (j.empty()) return ok_status();
    try {
        for (const auto& t : j.at("tasks")) {
            auto task = update_task_from_json(t);
            if (!task) return task.error();
            tasks_.push_back(std::move(*task));
        }
        next_task_ = std::max(next_task_, j.at("next_task").get<unsigned long>());
        pending_updates_ = j.at("pending_updates").get<std::vector<json>>();
        applied_updates_ = j.at("updates").get<std::vector<json>>();
        last_boot_ = j.at("last_boot");
        resets_ = j.value("resets", 0ul);  // absent from state files written before it
        unavailable_until_ = j.at("unavailable_until").get<double>();
        // Absent from state files written before it existed.
        if (j.contains("direct_bios_pending"))
            direct_bios_pending_ = j.at("direct_bios_pending").get<std::map<std::string, json>>();
        if (j.contains("post")) {
            post_system_ = j.at("post").at("system").get<std::string>();
            post_until_ = j.at("post").at("until").get<double>();
        }
    } catch (const json::exception& e) {
        return make_error("bmc", "bmc.state_malformed", std::string("the emulator section is malformed: ") + e.what());
    }
    // A download the emulator's own restart cut off does not resume.
    const double t = now();
    for (auto& task : tasks_) {
        if (!task.done && task.started < 0) {
            fail_task(task, messages::transfer_failed(task.image, "interrupted by a restart of the BMC"), t);
        }
    }
    return ok_status();
}

}  // namespace kiln::bmc
