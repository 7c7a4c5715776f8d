#include "firmware/stage/firmware_stage.h"

#include <algorithm>

#include <fmt/format.h>

#include "firmware/stage/component_match.h"
#include "firmware/stage/firmware_inputs.h"
#include "firmware/stage/host_os_boot.h"
#include "provisioner/core/sha256.h"
#include "provisioner/net/url.h"

namespace kiln::firmware {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

Error stage_error(const std::string& code, const std::string& message, bool transient = false) {
    return make_error("firmware", code, message, transient);
}

const FirmwareComponent* component_named(const FirmwareProfile& p, const std::string& name) {
    for (const auto& c : p.components)
        if (c.name == name) return &c;
    return nullptr;
}

// Appended to "not found" errors: the parts of the inventory that could not
// be read, since the component may be behind one of them.
std::string unread_parts(const BmcInventory& inv) {
    std::string out;
    for (const auto& w : inv.warnings) out += (out.empty() ? "" : "; ") + w.str();
    return out.empty() ? "" : " (not read: " + out + ")";
}

ComponentSelector selector_of(const FirmwareComponent& c) {
    return {c.name, c.match, c.related_item};
}

// "GPU_SXM_2, GPU_SXM_5": the members not at the version, by Id.
std::string member_ids(const std::vector<FirmwareItem>& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ", ") + (i.id.empty() ? i.name : i.id);
    return out;
}

// What an update sends as Targets: every member off the version, or none
// (the BMC decides) when one of them is known only through the system's or
// manager's version and has no inventory resource.
json update_targets(const std::vector<FirmwareItem>& off) {
    json targets = json::array();
    for (const auto& i : off) {
        if (i.uri.empty()) return json::array();
        targets.push_back(i.uri);
    }
    return targets;
}

// A 202 that names a task to follow (Location, or a Task body).
bool has_task_monitor(const redfish::Response& r) {
    if (!r.header("Location").empty()) return true;
    return r.body.is_object() && r.body.contains("@odata.id") && r.body["@odata.id"].is_string();
}

bool transient_warnings(const BmcInventory& inv) {
    return std::any_of(inv.warnings.begin(), inv.warnings.end(), [](const InventoryWarning& w) { return w.transient; });
}

std::string list_components(const BmcInventory& inv) {
    std::string out;
    for (const auto& c : inv.components) out += (out.empty() ? "" : ", ") + (c.name.empty() ? c.id : c.name);
    return out.empty() ? "nothing" : out;
}

// A raw attribute value from the fleet ("Enabled", "true", "64") typed like
// the BMC's current value.
Result<json> typed_value(const std::string& name, const std::string& value, const json& current) {
    if (current.is_boolean()) {
        if (value == "true" || value == "false") return json(value == "true");
        return stage_error(
            "firmware.bios_attribute",
            fmt::format("bios attribute {}: the BMC holds a boolean, '{}' is not true or false", name, value));
    }
    if (current.is_number_integer() || current.is_number_unsigned()) {
        try {
            size_t used = 0;
            long long v = std::stoll(value, &used);
            if (used == value.size()) return json(v);
        } catch (...) {
        }
        return stage_error("firmware.bios_attribute",
                           fmt::format("bios attribute {}: the BMC holds an integer, '{}' is not one", name, value));
    }
    return json(value);
}

json diff_attributes(const json& desired, const json& current) {
    json out = json::object();
    for (auto it = desired.begin(); it != desired.end(); ++it) {
        auto cur = current.find(it.key());
        if (cur == current.end() || *cur != it.value()) out[it.key()] = it.value();
    }
    return out;
}

// The stage's boundary (exceptions never cross a module's): whatever a
// BMC's reply did to the code below, that node's step fails with a named
// error and every other node goes on. Messages are made valid UTF-8 here,
// since BMC text reaches them and the journal stores them as JSON.
template <typename R>
R sanitised(R r) {
    if (r) return r;
    Error e = r.error();
    e.message = redfish::valid_utf8(e.message);
    return e;
}

template <typename F>
auto guarded(const engine::StageContext& ctx, const char* step, F&& body) -> decltype(body()) {
    auto failed = [&](const std::string& why) {
        return stage_error(
            "firmware.unreadable_reply",
            fmt::format("node {}: {}: stopped by a reply kiln cannot read ({})", ctx.node().name, step, why));
    };
    try {
        return sanitised(body());
    } catch (...) {
        return failed(redfish::current_exception_summary());
    }
}

// The first of `prefs` the BMC allows (inline or through its ActionInfo);
// with no list, the first. "" when the list allows none of them.
std::string pick_of(const BmcInventory& inv, const std::vector<std::string>& prefs) {
    if (inv.reset_types.empty()) return prefs.front();
    for (const auto& p : prefs)
        if (std::find(inv.reset_types.begin(), inv.reset_types.end(), p) != inv.reset_types.end()) return p;
    return "";
}

std::string pick_reset(const BmcInventory& inv, bool powered_on) {
    return powered_on ? pick_of(inv, {"ForceRestart", "GracefulRestart", "PowerCycle"})
                      : pick_of(inv, {"On", "ForceOn"});
}

}  // namespace

Result<redfish::Endpoint> bmc_endpoint(const config::Node& node) {
    redfish::Endpoint e;
    e.url = node.bmc.url;
    e.user = node.bmc.username;
    if (e.url.empty()) return stage_error("firmware.config", fmt::format("node {}: no bmc.url", node.name));
    if (node.bmc.password) {
        auto pw = node.bmc.password->resolve();
        if (!pw)
            return stage_error("firmware.secret", fmt::format("node {}: bmc.password ({}): {}", node.name,
                                                              node.bmc.password->reference(), pw.error().message));
        e.password = std::move(*pw);
    }
    e.tls.verify = node.bmc.verify_tls;
    e.tls.ca_bundle = node.bmc.ca_bundle;
    e.tls.pinned_sha256 = node.bmc.fingerprint;
    return e;
}

Result<DesiredBios> desired_bios(const BiosProfile& profile, const std::string& vendor, const json& current,
                                 const std::map<std::string, std::vector<std::string>>& allowed) {
    std::vector<std::pair<std::string, bool>> intents;
    if (profile.sriov) intents.emplace_back("sriov", *profile.sriov);
    if (profile.iommu) intents.emplace_back("iommu", *profile.iommu);
    if (profile.acs) intents.emplace_back("acs", *profile.acs);
    if (profile.above_4g_decoding) intents.emplace_back("above_4g_decoding", *profile.above_4g_decoding);
    auto v = redfish::vendor_from_name(vendor).value_or(redfish::Vendor::Generic);
    auto mapped = redfish::map_bios_intents(redfish::profile_for(v), intents, current, allowed);
    if (!mapped) return mapped.error();
    DesiredBios out;
    out.attributes = mapped->attributes;
    out.not_applicable = mapped->not_applicable;
    for (const auto& [name, value] : profile.extra) {
        if (!current.is_object() || !current.contains(name))
            return stage_error("firmware.bios_attribute",
                               fmt::format("{}: bios.{}.attributes.{}: '{}' is not a BIOS attribute of this BMC",
                                           profile.pos.str(), profile.name, name, name));
        auto typed = typed_value(name, value, current[name]);
        if (!typed) return typed.error();
        auto a = allowed.find(name);
        if (typed->is_string() && a != allowed.end() && !a->second.empty() &&
            std::find(a->second.begin(), a->second.end(), value) == a->second.end())
            return stage_error(
                "firmware.bios_attribute",
                fmt::format("{}: bios.{}.attributes.{}: '{}' is not an allowed value per the BMC's attribute "
                            "registry",
                            profile.pos.str(), profile.name, name, value));
        out.attributes[name] = *typed;
    }
    return out;
}

FirmwareStage::FirmwareStage(std::shared_ptr<net::HttpClient> http, FirmwareStageOptions options)
    : http_(http ? std::move(http) : std::make_shared<net::CurlHttpClient>()),
      options_(std::move(options)),
      pool_(std::make_unique<redfish::SessionPool>(*http_, options_.session)) {}

FirmwareStage::~FirmwareStage() {
    pool_.reset();  // log out of every BMC before the transport goes
}

Result<nlohmann::json> FirmwareStage::inputs(const engine::StageContext& ctx) const {
    return firmware_inputs(ctx.fleet(), ctx.node());
}

std::vector<std::string> FirmwareStage::resources(const config::Fleet&, const config::Node& node) const {
    auto parts = net::split_url(node.bmc.url);
    if (!parts) return {"bmc:" + node.bmc.url};
    bool v6 = parts->host.find(':') != std::string::npos;
    return {fmt::format("bmc:{}{}{}:{}", v6 ? "[" : "", parts->host, v6 ? "]" : "", parts->port)};
}

ArtifactServer* FirmwareStage::artifact_server() {
    std::lock_guard<std::mutex> lock(artifacts_mu_);
    return artifacts_.get();
}

Result<ArtifactServer*> FirmwareStage::artifacts(const config::Fleet& fleet) {
    std::lock_guard<std::mutex> lock(artifacts_mu_);
    if (!artifacts_) {
        ArtifactServerConfig cfg = options_.artifacts;
        if (const auto* table = artifact_server_table(fleet)) cfg = {table->listen, table->advertise};
        auto s = ArtifactServer::start(cfg);
        if (!s) return s.error();
        artifacts_ = std::move(*s);
    }
    return artifacts_.get();
}

namespace {
std::string node_key(const engine::StageContext& ctx) {
    return ctx.fleet().path + "\n" + ctx.node().name;
}
}  // namespace

Result<redfish::Client> FirmwareStage::client(engine::StageContext& ctx, const std::string& flow) {
    auto ep = bmc_endpoint(ctx.node());
    if (!ep) return ep.error();
    auto session = pool_->acquire(*ep);
    return redfish::Client(
        session, [&ctx](milliseconds d) { return ctx.wait_for(d); }, reads_.counter(node_key(ctx), flow));
}

InventoryOptions FirmwareStage::full_options(const engine::StageContext& ctx) const {
    InventoryOptions opts;
    opts.virtual_media = host_os_image(ctx.fleet(), ctx.node()) != nullptr;
    opts.bios = bios_profile(ctx.fleet(), ctx.node()) != nullptr;  // no BIOS read without a BIOS profile
    opts.system_uri = ctx.node().bmc.system;
    return opts;
}

Result<BmcInventory> FirmwareStage::inventory(engine::StageContext& ctx, redfish::Client& client,
                                              const InventoryOptions& want) {
    if (auto kept = reads_.take(node_key(ctx), want)) {
        client.set_expand(kept->expand_query);  // the task reads that follow use it too
        return std::move(*kept);
    }
    return read_inventory(client, want);
}

RegistryValues FirmwareStage::registry(engine::StageContext& ctx, redfish::Client& client, const BmcInventory& inv) {
    if (auto kept = reads_.registry(node_key(ctx))) return *kept;
    auto values = read_bios_registry(client, inv);
    reads_.keep_registry(node_key(ctx), values);
    return values;
}

Result<engine::Observation> FirmwareStage::observe(engine::StageContext& ctx) {
    return guarded(ctx, "observe", [&] { return observe_unguarded(ctx); });
}

Result<std::vector<engine::Action>> FirmwareStage::plan(engine::StageContext& ctx,
                                                        const engine::Observation& observed) {
    return guarded(ctx, "plan", [&] { return plan_unguarded(ctx, observed); });
}

Status FirmwareStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    return guarded(ctx, "apply", [&] { return apply_unguarded(ctx, action); });
}

Status FirmwareStage::verify(engine::StageContext& ctx) {
    auto st = guarded(ctx, "verify", [&] { return verify_unguarded(ctx); });
    // What this node's flows cost its BMC, for people and bench/redfish.
    long total = 0;
    std::string parts;
    for (const auto& [flow, n] : reads_.requests(node_key(ctx))) {
        total += n;
        parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", flow, n);
    }
    if (total > 0) ctx.event("note", fmt::format("BMC requests: {} ({} in all)", parts, total));
    return st;
}

Result<engine::Observation> FirmwareStage::observe_unguarded(engine::StageContext& ctx) {
    auto c = client(ctx, "inventory");
    if (!c) return c.error();
    ctx.progress("reading the BMC inventory");
    const InventoryOptions opts = full_options(ctx);
    auto inv = read_inventory(*c, opts);
    if (!inv) return inv.error();
    reads_.keep(node_key(ctx), *inv, opts);  // for the first apply, or verify when converged
    const auto& prof = redfish::profile_for(redfish::vendor_from_name(inv->vendor).value_or(redfish::Vendor::Generic));
    c->session().add_busy_message_ids(prof.busy_message_ids, prof.retry_conflict);
    engine::Observation o;
    o.state = inv->to_json();
    for (const auto& w : inv->warnings) o.notes.push_back("inventory part not read: " + w.str());
    json allowed = json::object();
    if (bios_profile(ctx.fleet(), ctx.node()))
        for (const auto& [name, values] : registry(ctx, *c, *inv)) allowed[name] = values;
    o.state["registry_values"] = allowed;
    return o;
}

Result<std::vector<engine::Action>> FirmwareStage::plan_unguarded(engine::StageContext& ctx,
                                                                  const engine::Observation& observed) {
    std::vector<engine::Action> actions;
    const json& st = observed.state;
    BmcInventory inv;
    inv.vendor = st.value("vendor", "generic");
    inv.bios_version = st.value("bios_version", "");
    inv.bmc_version = st.value("bmc_version", "");
    inv.system_uri = st.value("system", "");
    inv.manager_uri = st.value("manager", "");
    for (const auto& c : st.value("components", json::array()))
        inv.components.push_back({c.value("id", ""), c.value("name", ""), c.value("version", ""), c.value("uri", ""),
                                  c.value("source", ""), c.value("related", std::vector<std::string>{})});
    for (const auto& w : st.value("warnings", json::array()))
        inv.warnings.push_back({w.value("part", ""), w.value("message", ""), false});

    if (const auto* fw = firmware_profile(ctx.fleet(), ctx.node())) {
        for (const auto& comp : fw->components) {
            auto cs = component_state(inv, selector_of(comp), comp.version);
            if (cs.members.empty())
                return stage_error(
                    "firmware.component",
                    fmt::format("{}: component '{}' of firmware profile '{}' is not in the BMC's "
                                "inventory (it lists {}){}",
                                comp.pos.str(), comp.name, fw->name, list_components(inv), unread_parts(inv)));
            if (cs.off.empty()) continue;
            engine::Action a;
            a.id = fmt::format("flash:{}:{}", comp.name, comp.version);
            // One member: as before. A set: how many are off, and where all are.
            a.description =
                cs.members.size() == 1
                    ? fmt::format("update {} from {} to {}", comp.name, cs.off[0].version, comp.version)
                    : fmt::format("update {} on {} of {} members to {} ({}; to update: {})", comp.name, cs.off.size(),
                                  cs.members.size(), comp.version, cs.counts, member_ids(cs.off));
            json off = json::array();
            for (const auto& m : cs.off) off.push_back({{"id", m.id}, {"uri", m.uri}, {"version", m.version}});
            a.detail = {{"component", comp.name},
                        {"from", cs.members.size() == 1 ? cs.off[0].version : cs.counts},
                        {"to", comp.version},
                        {"targets", update_targets(cs.off)},
                        {"off", off},
                        {"members", cs.members.size()}};
            actions.push_back(std::move(a));
        }
    }
    if (const auto* bp = bios_profile(ctx.fleet(), ctx.node())) {
        if (!st.contains("bios"))
            return stage_error("firmware.bios", fmt::format("node {}: the BMC has no readable Bios resource, but bios "
                                                            "profile '{}' is set{}",
                                                            ctx.node().name, bp->name, unread_parts(inv)));
        std::map<std::string, std::vector<std::string>> allowed;
        for (auto it = st["registry_values"].begin(); it != st["registry_values"].end(); ++it)
            allowed[it.key()] = it.value().get<std::vector<std::string>>();
        auto want = desired_bios(*bp, inv.vendor, st["bios"]["attributes"], allowed);
        if (!want) return want.error();
        for (const auto& na : want->not_applicable) ctx.event("note", "bios intent not applicable: " + na);
        json diff = diff_attributes(want->attributes, st["bios"]["attributes"]);
        if (!diff.empty()) {
            engine::Action a;
            a.id = "bios:" + sha256_hex(want->attributes.dump()).substr(0, 12);
            std::string names;
            for (auto it = diff.begin(); it != diff.end(); ++it) names += (names.empty() ? "" : ", ") + it.key();
            a.description = fmt::format("set BIOS {} (applied at reset)", names);
            a.detail = {{"attributes", diff}};
            actions.push_back(std::move(a));
        }
    }
    // Last: the host boots its OS once firmware and BIOS are as wanted.
    if (const auto* os = host_os_image(ctx.fleet(), ctx.node())) {
        auto boot = plan_host_os_boot(ctx.node(), *os, st);
        if (!boot) return boot.error();
        if (*boot) actions.push_back(std::move(**boot));
    }
    return actions;
}

Status FirmwareStage::apply_unguarded(engine::StageContext& ctx, const engine::Action& action) {
    const std::string flow = action.id.rfind("flash:", 0) == 0  ? "update"
                             : action.id.rfind("bios:", 0) == 0 ? "bios"
                                                                : "boot";
    auto c = client(ctx, flow);
    if (!c) return c.error();
    if (action.id.rfind("flash:", 0) == 0) return flash(ctx, *c, action);
    if (action.id.rfind("bios:", 0) == 0) return apply_bios(ctx, *c, action);
    // The host OS boot reads on its own, and changes what a kept read shows.
    reads_.drop(node_key(ctx));
    if (action.id.rfind("boot:", 0) == 0) return boot_host_os(ctx, *c, action);
    return stage_error("firmware.action", "unknown action " + action.id);
}

Result<bool> FirmwareStage::wait_running_tasks(engine::StageContext& ctx, redfish::Client& client,
                                               const BmcInventory& inv) {
    bool waited = false;
    if (inv.tasks_uri.empty()) return waited;
    auto members = client.members(inv.tasks_uri);      // one request where the BMC expands it
    if (!members) return waited;                       // no task list to read: nothing known to wait for
    size_t n = std::min<size_t>(members->size(), 32);  // the newest are last on most BMCs
    for (size_t i = members->size() - n; i < members->size(); ++i) {
        auto t = client.read((*members)[i]);
        if (!t || !t->body.is_object()) continue;
        auto read_state = t->view().opt_str("TaskState");  // a non-string state is not a running task
        std::string state = read_state ? *read_state : std::string();
        if (state.empty() || redfish::task_phase(state, "") != redfish::TaskPhase::Running) continue;
        const std::string& uri = (*members)[i].uri;
        ctx.event("note", fmt::format("waiting for task {} ({}) started before this run", uri, state));
        const redfish::TaskOptions opts = task_options();
        auto poll = redfish::TaskPoll::of_uri(uri, opts);
        // Parks between polls; the resume follows this poll, then flashes
        // from the top (flash()).
        json parked = {{"phase", "earlier_task"}};
        auto r = poll_or_park(ctx, client, poll, parked, "task started before this run");
        waited = true;
        if (!r && (r.error().code == "redfish.stopped" || r.error().code == "engine.parked")) return r.error();
        // A failed earlier task is the earlier run's business: we re-check versions.
    }
    return waited;
}

Status FirmwareStage::reset_host(engine::StageContext& ctx, redfish::Client& client, const BmcInventory& inv,
                                 json after) {
    if (inv.reset_target.empty())
        return stage_error("firmware.reset", fmt::format("{}: no ComputerSystem.Reset action", inv.system_uri));
    const bool on = inv.power_state != "Off";
    std::vector<std::string> steps;
    if (std::string type = pick_reset(inv, on); !type.empty()) {
        steps = {type};
    } else if (on) {
        // No restart type allowed (a BMC offering only On/ForceOff): off, then on.
        std::string off = pick_of(inv, {"ForceOff", "GracefulShutdown"}), up = pick_of(inv, {"On", "ForceOn"});
        if (!off.empty() && !up.empty()) steps = {off, up};
    }
    if (steps.empty())
        return stage_error("firmware.reset", fmt::format("{}: the BMC allows reset types {}, none of which restarts "
                                                         "the host",
                                                         inv.system_uri, fmt::join(inv.reset_types, ", ")));
    after["reset"] = {{"target", inv.reset_target}, {"steps", steps}};
    return send_reset_steps(ctx, client, after);
}

// Sends state["reset"]["steps"] in order; a step the BMC runs as a task is
// polled (parking between polls) before the next is sent.
Status FirmwareStage::send_reset_steps(engine::StageContext& ctx, redfish::Client& client, json& state) {
    const redfish::TaskOptions opts = task_options();
    const std::string target = state["reset"].value("target", "");
    while (!state["reset"]["steps"].empty()) {
        const std::string type = state["reset"]["steps"][0].get<std::string>();
        state["reset"]["steps"].erase(0);  // sent: a resume must not send it again
        ctx.progress("resetting the host (" + type + ")");
        auto r = client.post(target, json{{"ResetType", type}});
        if (!r) return r.error();
        if (!r->ok()) return redfish::status_error(*r);
        if (r->status == 202) {
            auto poll = redfish::TaskPoll::start(client, *r, opts);
            if (!poll) return poll.error();
            if (auto st = poll_or_park(ctx, client, *poll, state, "host reset (" + type + ")",
                                       json::json_pointer("/reset/poll"));
                !st)
                return st;
            state["reset"].erase("poll");
        }
    }
    state.erase("reset");
    return ok_status();
}

Status FirmwareStage::resume_reset(engine::StageContext& ctx, redfish::Client& client, json& state) {
    if (!state.contains("reset")) return ok_status();
    if (state["reset"].contains("poll")) {
        const redfish::TaskOptions opts = task_options();
        auto poll = redfish::TaskPoll::restore(state["reset"]["poll"], opts);
        if (!poll) return poll.error();
        if (auto st = poll_or_park(ctx, client, *poll, state, "host reset", json::json_pointer("/reset/poll")); !st)
            return st;
        state["reset"].erase("poll");
    }
    return send_reset_steps(ctx, client, state);
}

// Sends the update: SimpleUpdate with an ImageURI on kiln's artifact
// server, else a multipart push. Returns the BMC's 2xx reply (a task).
Result<redfish::Response> FirmwareStage::start_update(engine::StageContext& ctx, redfish::Client& client,
                                                      const BmcInventory& inv, const redfish::VendorProfile& prof,
                                                      const FirmwareComponent& comp, const FirmwareProfile& fw,
                                                      const json& targets) {
    const bool on_reset = fw.apply_time == "OnReset";
    auto unsupported = [&](const char* path, const std::vector<std::string>& offered) -> Result<redfish::Response> {
        return stage_error(
            "firmware.apply_time",
            fmt::format("{}: the BMC's {} offers apply times {}, firmware profile '{}' asks for {} "
                        "({})",
                        ctx.node().bmc.url, path, fmt::join(offered, ", "), fw.name, fw.apply_time, fw.pos.str()));
    };
    bool http_ok =
        inv.transfer_protocols.empty() ||
        std::find(inv.transfer_protocols.begin(), inv.transfer_protocols.end(), "HTTP") != inv.transfer_protocols.end();
    Result<redfish::Response> started = stage_error("firmware.no_update_path", "");
    if (!inv.simple_update_target.empty() && !prof.multipart_only && http_ok) {
        const auto& times = inv.simple_update_apply_times;
        if (on_reset && !times.empty() && std::find(times.begin(), times.end(), fw.apply_time) == times.end())
            return unsupported("SimpleUpdate", times);
        auto server = artifacts(ctx.fleet());
        if (!server) return server.error();
        auto url = (*server)->publish(comp.artifact, comp.sha256, on_reset);
        if (!url) return url.error();
        ctx.progress(fmt::format("{}: SimpleUpdate to {}", comp.name, comp.version));
        json body = {{"ImageURI", *url}, {"TransferProtocol", "HTTP"}};
        if (!targets.empty()) body["Targets"] = targets;
        // Immediate is the default: sent only when asked otherwise, as
        // before, for BMCs that refuse parameters they do not know.
        if (on_reset) body["@Redfish.OperationApplyTime"] = fw.apply_time;
        started = client.post(inv.simple_update_target, body);
    } else if (!inv.multipart_uri.empty()) {
        const auto& times = inv.update_apply_times;
        if (on_reset && !times.empty() && std::find(times.begin(), times.end(), fw.apply_time) == times.end())
            return unsupported("MultipartHttpPushUri", times);
        auto digest = sha256_file(comp.artifact);
        if (!digest)
            return stage_error("firmware.artifact_io",
                               fmt::format("artifact {}: {}", comp.artifact, digest.error().message));
        if (*digest != comp.sha256)
            return stage_error("firmware.artifact_digest",
                               fmt::format("artifact {}: sha256 is {}, the fleet expects {}; not pushed", comp.artifact,
                                           *digest, comp.sha256));
        json params = {{"Targets", targets}, {"@Redfish.OperationApplyTime", fw.apply_time}};
        std::vector<net::MultipartPart> parts;
        parts.push_back({"UpdateParameters", "application/json", params.dump(), "", ""});
        std::string filename = on_reset ? ArtifactServer::served_suffix(comp.artifact, comp.sha256) : "";
        std::replace(filename.begin(), filename.end(), '/', '-');
        parts.push_back({"UpdateFile", "application/octet-stream", "", comp.artifact, filename});
        ctx.progress(fmt::format("{}: multipart push of {}", comp.name, comp.version));
        started = client.post_multipart(inv.multipart_uri, std::move(parts), options_.push_timeout);
    } else {
        return stage_error("firmware.no_update_path",
                           fmt::format("{}: the BMC offers neither SimpleUpdate over HTTP nor MultipartHttpPushUri",
                                       ctx.node().bmc.url));
    }
    if (!started) return started.error();
    if (!started->ok()) return redfish::status_error(*started);
    return started;
}

// A finished update task that staged this image for `target` and waits for
// a reset (DMTF Update registry AwaitToActivate, with the target and an
// image name carrying `marker`, the digest prefix).
bool FirmwareStage::update_staged(redfish::Client& client, const BmcInventory& inv, const std::string& target,
                                  const std::string& marker) {
    if (inv.tasks_uri.empty()) return false;
    auto members = client.members(inv.tasks_uri);
    if (!members) return false;
    size_t n = std::min<size_t>(members->size(), 32);
    for (size_t i = members->size() - n; i < members->size(); ++i) {
        auto t = client.read((*members)[i]);
        if (!t || !t->body.is_object()) continue;
        auto state = t->view().opt_str("TaskState");
        if (!state || redfish::task_phase(*state, "") != redfish::TaskPhase::Succeeded) continue;  // any case
        const json& msgs = t->body.value("Messages", json::array());
        if (!msgs.is_array()) continue;
        for (const auto& m : msgs) {
            if (!m.is_object() || !m.contains("MessageId") || !m["MessageId"].is_string() ||
                m["MessageId"].get<std::string>().find("AwaitToActivate") == std::string::npos)
                continue;
            bool for_target = false, ours = false;
            for (const auto& arg : m.value("MessageArgs", json::array())) {
                if (!arg.is_string()) continue;
                const std::string a = arg.get<std::string>();
                for_target |= a == target;
                ours |= a.find(marker) != std::string::npos;
            }
            if (for_target && ours) return true;
        }
    }
    return false;
}

// The job to follow after the host reset, "" when none: a Dell update task
// that ended Scheduled, or was purged (then the job says where it stands:
// Completed or gone, the read-back decides; Failed, an error; Scheduled, it
// waits for the reset like the first case).
Result<std::string> FirmwareStage::job_after_task(engine::StageContext& ctx, redfish::Client& client,
                                                  const std::string& manager_uri, const redfish::VendorProfile& prof,
                                                  const redfish::TaskResult& task, const redfish::TaskOptions& opts) {
    if (prof.job_queue_suffix.empty() || manager_uri.empty()) return std::string();
    if (task.state != "Scheduled" && task.state != "Purged") return std::string();
    std::string jid = redfish::dell_job_id(task);
    if (jid.empty()) return std::string();
    std::string job_uri = manager_uri + prof.job_queue_suffix + "/" + jid;
    if (task.state == "Scheduled") {
        ctx.event("note", fmt::format("update job {} is scheduled: resetting the host to run it", jid));
        return job_uri;
    }
    ctx.event("note", fmt::format("update task {} was purged: following job {}", task.monitor, jid));
    redfish::TaskOptions until_scheduled = opts;
    until_scheduled.stop_at_scheduled = true;
    auto job = redfish::follow_dell_job(client, job_uri, until_scheduled);
    if (!job) return job.error();
    return job->state == "Scheduled" ? job_uri : std::string();
}

Status FirmwareStage::flash(engine::StageContext& ctx, redfish::Client& client, const engine::Action& action) {
    const auto* fw = firmware_profile(ctx.fleet(), ctx.node());
    std::string name = action.detail.value("component", "");
    const FirmwareComponent* comp = fw ? component_named(*fw, name) : nullptr;
    if (!comp) return stage_error("firmware.action", "action " + action.id + " names no component of the profile");
    // Back from a park between two polls of the update task.
    const json* resumed = ctx.resumed();
    if (resumed && resumed->value("phase", "") == "update_task") return await_update(ctx, client, *comp, *resumed);
    if (resumed && resumed->value("phase", "") == "read_back") return read_back(ctx, client, *comp, *resumed);
    if (resumed && resumed->value("phase", "") == "earlier_task") {
        // A task found running at the start: follow it to its end, then
        // flash as if it had just been found finished.
        const redfish::TaskOptions opts = task_options();
        auto poll = redfish::TaskPoll::restore(resumed->at("poll"), opts);
        if (!poll) return poll.error();
        json parked = *resumed;
        auto r = poll_or_park(ctx, client, *poll, parked, "task started before this run");
        if (!r && (r.error().code == "redfish.stopped" || r.error().code == "engine.parked")) return r;
        reads_.drop(node_key(ctx));  // the task may have changed what a kept read shows
    }

    // Crash safety: what is on the BMC now decides, not what the plan saw.
    // An update still running from a killed run is waited for, never repeated.
    // The read observe (or the previous action) handed on is that: nothing
    // ran on this BMC in between but the plan.
    InventoryOptions light{.bios = false, .network_adapters = true, .system_uri = ctx.node().bmc.system};
    auto inv = inventory(ctx, client, light);
    if (!inv) return inv.error();
    auto waited = wait_running_tasks(ctx, client, *inv);
    if (!waited) return waited.error();
    if (*waited) {
        inv = read_inventory(client, light);
        if (!inv) return inv.error();
    }
    const ComponentSelector sel = selector_of(*comp);
    auto cs = component_state(*inv, sel, comp->version);
    if (cs.members.empty())
        return stage_error(
            "firmware.component",
            fmt::format("component '{}' is not in the BMC's inventory{}", comp->name, unread_parts(*inv)),
            transient_warnings(*inv));
    if (cs.off.empty()) {
        ctx.event("note", fmt::format("{} already at {}: nothing to flash ({})", comp->name, comp->version, cs.counts));
        return ok_status();
    }
    const auto& prof = redfish::profile_for(redfish::vendor_from_name(inv->vendor).value_or(redfish::Vendor::Generic));
    // Every member off the version, in one update (DSP0266 Targets is a set).
    json targets = update_targets(cs.off);
    // OnReset: the image's digest goes into its URL / file name, so an update
    // staged by a run killed before its reset is recognised, not sent again.
    const bool on_reset = fw->apply_time == "OnReset";
    const std::string marker = comp->sha256.substr(0, 16);
    std::string task_note = "staged by an earlier run";
    std::string job_uri;  // a Dell job waiting for the host reset
    const bool staged = on_reset && !targets.empty() && std::all_of(targets.begin(), targets.end(), [&](const json& t) {
                            return update_staged(client, *inv, t.get<std::string>(), marker);
                        });
    if (staged) {
        ctx.event("note", fmt::format("{} {} is staged on the BMC by an earlier run: resetting the host to activate "
                                      "it, not flashing again",
                                      comp->name, comp->version));
    } else {
        if (cs.members.size() > 1)
            ctx.event("note", fmt::format("{}: {}; updating {}", comp->name, cs.counts, member_ids(cs.off)));
        auto started = start_update(ctx, client, *inv, prof, *comp, *fw, targets);
        if (!started) return started.error();
        if (prof.update_without_task_monitor && !has_task_monitor(*started)) {
            // Some iLO firmware accepts the update with no task to follow:
            // the read-back below is the only word on it.
            task_note = "accepted without a task monitor";
            ctx.event("note", fmt::format("{}: the BMC gave no task monitor; reading the version back", comp->name));
        } else {
            auto poll = redfish::TaskPoll::start(client, *started, update_task_options(ctx, *comp));
            if (!poll) return poll.error();
            // What the rest of the flash needs, so that it can go on after
            // a park without reading the BMC again.
            json state = {{"phase", "update_task"},
                          {"poll", poll->save()},
                          {"seen", cs.counts},
                          {"manager_uri", inv->manager_uri},
                          {"vendor", inv->vendor}};
            return await_update(ctx, client, *comp, state);
        }
    }
    return read_back(ctx, client, *comp, json{{"seen", cs.counts}, {"task_note", task_note}, {"job_uri", job_uri}});
}

redfish::TaskOptions FirmwareStage::task_options() const {
    return redfish::TaskOptions{options_.task_poll, milliseconds(30000), options_.task_timeout};
}

redfish::TaskOptions FirmwareStage::update_task_options(engine::StageContext& ctx,
                                                        const FirmwareComponent& comp) const {
    redfish::TaskOptions opts = task_options();
    opts.progress = [&ctx, name = comp.name](const std::string& state, int pct) {
        ctx.progress(fmt::format("{}: update task {}", name, state), pct);
    };
    return opts;
}

// Polls the update task; between polls the node parks (its thread goes back
// to the engine) where the engine allows, else waits here. `state` carries
// the poll and what the read-back needs across parks.
Status FirmwareStage::await_update(engine::StageContext& ctx, redfish::Client& client, const FirmwareComponent& comp,
                                   json state) {
    const auto opts = update_task_options(ctx, comp);
    auto poll = redfish::TaskPoll::restore(state["poll"], opts);
    if (!poll) return poll.error();
    if (auto st = poll_or_park(ctx, client, *poll, state, comp.name + ": update task"); !st) return st;
    const auto& task = poll->result();
    const auto& prof =
        redfish::profile_for(redfish::vendor_from_name(state.value("vendor", "")).value_or(redfish::Vendor::Generic));
    auto job = job_after_task(ctx, client, state.value("manager_uri", ""), prof, task, opts);
    if (!job) return job.error();
    return read_back(ctx, client, comp,
                     json{{"seen", state.value("seen", "")},
                          {"task_note", fmt::format("task {} {}", task.monitor, task.state)},
                          {"job_uri", *job}});
}

// Polls `poll` to its end. Between polls: parks where the engine can resume
// the action (`state` with the poll saved under "poll" is what the resume
// gets back), else waits in the client.
Status FirmwareStage::poll_or_park(engine::StageContext& ctx, redfish::Client& client, redfish::TaskPoll& poll,
                                   json& state, const std::string& what, const json::json_pointer& slot) {
    while (!poll.done()) {
        if (poll.wait().count() > 0) {
            if (ctx.can_park()) {
                // The resume polls at once: its wait is over.
                state[slot] = poll.save();
                return ctx.park_for(poll.wait(), std::move(state),
                                    fmt::format("{} {} ({})", what, poll.result().monitor, poll.result().state));
            }
            if (!client.wait(poll.wait()))
                return make_error("redfish", "redfish.stopped",
                                  fmt::format("task {}: stopped while waiting", poll.result().monitor));
        }
        if (auto st = poll.step(client); !st) return st.error();
    }
    return ok_status();
}

// After the update was sent (and its task ended): read the version back.
// `state`: seen (the member versions last read), task_note, job_uri; and,
// when resumed from a park between reads, reset_done and until_ms.
Status FirmwareStage::read_back(engine::StageContext& ctx, redfish::Client& client, const FirmwareComponent& comp_ref,
                                const json& state) {
    const FirmwareComponent* comp = &comp_ref;
    const ComponentSelector sel = selector_of(*comp);
    std::string seen = state.value("seen", ""), task_note = state.value("task_note", "");
    const std::string job_uri = state.value("job_uri", "");

    // Read the version back; the BMC may be restarting (its own update) or
    // the update may wait for a host reset (apply time OnReset: the first
    // read finds the old version and resets; some BMCs wait for a reset
    // even when asked for Immediate).
    bool reset_done = state.value("reset_done", false);
    auto until = state.contains("until_ms") ? Clock::time_point(milliseconds(state["until_ms"].get<int64_t>()))
                                            : Clock::now() + options_.settle_timeout;
    // The iDRAC job the reset runs, followed a poll at a time until it ends.
    bool job_pending = state.value("job_pending", false);
    auto job_until = Clock::time_point(milliseconds(state.value("job_until_ms", int64_t{0})));
    redfish::TaskResult job;
    job.state = state.value("job_state", "Scheduled");
    std::string last_error;
    redfish::TaskOptions job_opts = task_options();
    job_opts.progress = [&](const std::string& job_state, int pct) {
        ctx.progress(fmt::format("{}: {}", comp->name, job_state), pct);
    };
    // Between reads: park where the engine can resume (the BMC restarts,
    // the host resets, the job runs), else wait. Empty: read again.
    auto resume_state = [&] {
        return json{{"phase", "read_back"},
                    {"seen", seen},
                    {"task_note", task_note},
                    {"job_uri", job_uri},
                    {"reset_done", reset_done},
                    {"until_ms", std::chrono::duration_cast<milliseconds>(until.time_since_epoch()).count()},
                    {"job_pending", job_pending},
                    {"job_state", job.state},
                    {"job_until_ms", std::chrono::duration_cast<milliseconds>(job_until.time_since_epoch()).count()}};
    };
    auto pause = [&](milliseconds d, const std::string& why) -> std::optional<Status> {
        if (ctx.can_park()) return ctx.park_for(d, resume_state(), why);
        if (!ctx.wait_for(d))
            return stage_error("firmware.stopped",
                               fmt::format("{}: stopped while waiting for {}", comp->name, comp->version));
        return std::nullopt;
    };
    // Back from a park inside the host reset: see it through first.
    if (state.contains("reset")) {
        json resumed = state;
        if (auto st = resume_reset(ctx, client, resumed); !st) return st;
    }
    // Read with every part verify needs: the read that finds it done is
    // handed on to the next action or verify.
    const InventoryOptions full = full_options(ctx);
    for (;;) {
        if (job_pending) {
            // The reset runs the job: its JobState says how it went (a
            // failure with its Message, not a verify timeout).
            auto ended = redfish::poll_dell_job(client, job_uri, job_opts, job, last_error);
            if (!ended) return ended.error();
            if (!*ended) {
                if (Clock::now() >= job_until)
                    return redfish::job_timeout_error(job_uri, job.state, options_.task_timeout, last_error);
                if (auto p = pause(options_.task_poll, fmt::format("{}: job {} ({})", comp->name, job_uri, job.state)))
                    return *p;
                continue;
            }
            task_note += fmt::format("; job {} {}", job_uri, job.state);
            job_pending = false;
            until = Clock::now() + options_.settle_timeout;  // the read-back's own time starts now
        }
        auto now = read_inventory(client, full);
        if (now) {
            auto cur = component_state(*now, sel, comp->version);
            if (!cur.members.empty()) seen = cur.counts;
            // Done when every member is at the version, not just the first.
            if (!cur.members.empty() && cur.off.empty()) {
                reads_.keep(node_key(ctx), std::move(*now), full);
                return ok_status();
            }
            if (cur.members.empty()) {
                // The part that lists it did not answer (a BMC restarting):
                // not an old version, so no reset; read again.
                last_error = unread_parts(*now);
            } else if (!reset_done) {
                // Set first: a park inside the reset resumes past it.
                reset_done = true;
                if (!job_uri.empty()) {
                    job_pending = true;
                    job_until = Clock::now() + options_.task_timeout;
                }
                if (auto st = reset_host(ctx, client, *now, resume_state()); !st) return st;
                continue;
            }
        } else if (!now.error().transient && now.error().code != "redfish.status") {
            return now.error();
        } else {
            last_error = now.error().message;
        }
        if (Clock::now() >= until)
            return stage_error(
                "firmware.verify",
                fmt::format("{} still {} after the update to {} ({})", comp->name, seen, comp->version, task_note),
                true);
        if (auto p =
                pause(options_.settle_poll, fmt::format("{}: reading {} back ({})", comp->name, comp->version, seen)))
            return *p;
    }
}

Status FirmwareStage::apply_bios(engine::StageContext& ctx, redfish::Client& client, const engine::Action& action) {
    const auto* bp = bios_profile(ctx.fleet(), ctx.node());
    if (!bp) return stage_error("firmware.action", "action " + action.id + " but the node has no bios profile");
    // Back from a park while the host POSTs: the settings are written and
    // the host reset; read until they are applied.
    if (const json* resumed = ctx.resumed(); resumed && resumed->value("phase", "") == "bios_post") {
        json st = *resumed;
        auto until = Clock::time_point(milliseconds(st.value("until_ms", int64_t{0})));
        if (st.contains("reset")) {  // parked inside the reset: POST's time starts after it
            if (auto r = resume_reset(ctx, client, st); !r) return r;
            until = Clock::now() + options_.settle_timeout;
        }
        return await_bios_post(ctx, client, st.at("diff"), until);
    }
    bool written = false;  // back from the settings write's task: not written again
    if (const json* resumed = ctx.resumed(); resumed && resumed->value("phase", "") == "bios_task") {
        const redfish::TaskOptions opts = task_options();
        auto poll = redfish::TaskPoll::restore(resumed->at("poll"), opts);
        if (!poll) return poll.error();
        json parked = *resumed;
        if (auto st = poll_or_park(ctx, client, *poll, parked, "BIOS settings task"); !st) return st;
        reads_.drop(node_key(ctx));  // the settings task changed what a kept read shows
        written = true;
    }
    auto inv = inventory(ctx, client, {.bios = true, .network_adapters = false, .system_uri = ctx.node().bmc.system});
    if (!inv) return inv.error();
    if (!inv->bios)
        return stage_error("firmware.bios", inv->system_uri + ": no readable Bios resource" + unread_parts(*inv),
                           transient_warnings(*inv));
    auto want = desired_bios(*bp, inv->vendor, inv->bios->attributes, registry(ctx, client, *inv));
    if (!want) return want.error();
    json diff = diff_attributes(want->attributes, inv->bios->attributes);
    if (diff.empty()) {
        ctx.event("note", "BIOS attributes already hold the profile's values");
        return ok_status();
    }
    const auto& prof = redfish::profile_for(redfish::vendor_from_name(inv->vendor).value_or(redfish::Vendor::Generic));
    // Already pending from a run that stopped before its reset: just reset.
    bool pending_already = diff_attributes(diff, inv->bios->pending).empty() && !inv->bios->settings_uri.empty();
    if (!pending_already && !written) {
        if (prof.clear_job_queue && !inv->manager_uri.empty()) {
            auto r = client.post(inv->manager_uri + "/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue",
                                 json{{"JobID", "JID_CLEARALL"}});
            if (!r) return r.error();
        }
        std::string target = inv->bios->settings_uri.empty() ? inv->bios->uri : inv->bios->settings_uri;
        json body = {{"Attributes", diff}};
        const auto& times = inv->bios->apply_times;
        if (std::find(times.begin(), times.end(), "OnReset") != times.end())
            body["@Redfish.SettingsApplyTime"] = {{"ApplyTime", "OnReset"}};
        ctx.progress("writing BIOS settings to " + target);
        auto r = client.patch(target, body);
        if (!r) return r.error();
        if (!r->ok()) return redfish::status_error(*r);
        if (r->status == 202) {
            // Polled parking; the resume reads the BMC again and resets.
            const redfish::TaskOptions opts = task_options();
            auto poll = redfish::TaskPoll::start(client, *r, opts);
            if (!poll) return poll.error();
            json parked = {{"phase", "bios_task"}};
            if (auto st = poll_or_park(ctx, client, *poll, parked, "BIOS settings task"); !st) return st;
        }
    }
    if (auto st = reset_host(ctx, client, *inv, json{{"phase", "bios_post"}, {"diff", diff}}); !st) return st;

    ctx.progress("waiting for POST to apply the BIOS settings");
    return await_bios_post(ctx, client, diff, Clock::now() + options_.settle_timeout);
}

Status FirmwareStage::await_bios_post(engine::StageContext& ctx, redfish::Client& client, const json& diff,
                                      Clock::time_point until) {
    std::string last;
    const InventoryOptions full = full_options(ctx);  // bios included: a bios action means a bios profile
    for (;;) {
        auto now = read_inventory(client, full);
        if (now && now->bios) {
            json left = diff_attributes(diff, now->bios->attributes);
            bool pending = false;
            for (auto it = diff.begin(); it != diff.end(); ++it)
                if (now->bios->pending.contains(it.key())) pending = true;
            if (left.empty() && !pending) {
                reads_.keep(node_key(ctx), std::move(*now), full);  // for verify
                return ok_status();
            }
            last = fmt::format("{} attribute(s) not yet applied", left.size());
        } else if (now) {
            last = "Bios not readable" + unread_parts(*now);  // POST in progress on some BMCs
        } else if (!now && !now.error().transient) {
            return now.error();
        }
        if (Clock::now() >= until)
            return stage_error("firmware.verify", "BIOS settings not applied after the reset: " + last, true);
        if (ctx.can_park()) {
            // POST takes minutes on real hosts: no thread is held through it.
            json next = {{"phase", "bios_post"},
                         {"diff", diff},
                         {"until_ms", std::chrono::duration_cast<milliseconds>(until.time_since_epoch()).count()}};
            return ctx.park_for(options_.settle_poll, std::move(next),
                                "POST applying the BIOS settings" + (last.empty() ? "" : " (" + last + ")"));
        }
        if (!ctx.wait_for(options_.settle_poll))
            return stage_error("firmware.stopped", "stopped while waiting for the BIOS settings to apply");
    }
}

Status FirmwareStage::verify_unguarded(engine::StageContext& ctx) {
    auto c = client(ctx, "inventory");
    if (!c) return c.error();
    // The last read of the last action (taken after its change), or a fresh one.
    auto inv = inventory(ctx, *c, full_options(ctx));
    if (!inv) return inv.error();
    if (const auto* fw = firmware_profile(ctx.fleet(), ctx.node())) {
        for (const auto& comp : fw->components) {
            auto cs = component_state(*inv, selector_of(comp), comp.version);
            if (cs.members.empty())
                return stage_error("firmware.verify", fmt::format("{} reports nothing, the profile wants {}{}",
                                                                  comp.name, comp.version, unread_parts(*inv)));
            if (cs.off.empty()) continue;
            if (cs.members.size() == 1)
                return stage_error("firmware.verify", fmt::format("{} reports {}, the profile wants {}", comp.name,
                                                                  cs.off[0].version, comp.version));
            return stage_error("firmware.verify",
                               fmt::format("{}: {}; the profile wants all {} at {} (off: {})", comp.name, cs.counts,
                                           cs.members.size(), comp.version, member_ids(cs.off)));
        }
    }
    if (const auto* bp = bios_profile(ctx.fleet(), ctx.node())) {
        if (!inv->bios)
            return stage_error("firmware.verify", "the BMC has no readable Bios resource" + unread_parts(*inv));
        auto want = desired_bios(*bp, inv->vendor, inv->bios->attributes, registry(ctx, *c, *inv));
        if (!want) return want.error();
        json diff = diff_attributes(want->attributes, inv->bios->attributes);
        if (!diff.empty())
            return stage_error("firmware.verify", fmt::format("BIOS attributes differ: {}", diff.dump()));
    }
    return verify_host_os(ctx, *inv);
}

}  // namespace kiln::firmware
