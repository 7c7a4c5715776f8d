#include "firmware/bmc/bmc_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <thread>

#include "firmware/bmc/bios_settings.h"
#include "firmware/bmc/computer_system_reset.h"
#include "firmware/bmc/expand_query.h"
#include "firmware/bmc/json_reader.h"
#include "firmware/bmc/state_file.h"
#include "firmware/bmc/virtual_media.h"
#include "provisioner/core/base64.h"

namespace kiln::bmc {

namespace {

using nlohmann::json;

bool starts_with(const std::string& text, const std::string& prefix) {
    return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

BmcResponse json_response(int status, const json& body, const std::string& etag = "") {
    BmcResponse r;
    r.status = status;
    r.body = dump_json(body);
    if (!etag.empty()) r.headers.emplace_back("ETag", etag);
    return r;
}

BmcResponse method_not_allowed(const std::string& method, const std::string& uri, const std::string& allow) {
    BmcResponse r = error_response(405, messages::operation_not_allowed(method + " " + uri));
    r.headers.emplace_back("Allow", allow);
    return r;
}

std::string now_iso8601() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
    return buf;
}

// "Basic dXNlcjpwYXNz" -> "user:pass"; nullopt when not Basic or not base64.
std::optional<std::string> basic_credentials(const std::string& header) {
    if (header.size() < 6 || lower_ascii(header.substr(0, 6)) != "basic ") return std::nullopt;
    std::string b64 = header.substr(6);
    b64.erase(0, b64.find_first_not_of(' '));
    if (b64.empty() || b64.size() > 4096) return std::nullopt;
    return base64_decode(b64);
}

// Compares without an early exit, so timing does not reveal a prefix.
bool same_secret(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

// If-Match: a list of entity tags or "*". Weak forms of our strong tag are
// accepted too: clients copy @odata.etag values that vendors mark W/.
bool if_match_ok(const std::string& header, const std::string& etag) {
    size_t pos = 0;
    while (pos <= header.size()) {
        size_t comma = header.find(',', pos);
        std::string tag = header.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        tag.erase(0, tag.find_first_not_of(" \t"));
        tag.erase(tag.find_last_not_of(" \t") + 1);
        if (tag == "*" || tag == etag || tag == "W/" + etag) return true;
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return false;
}

// Redfish PATCH: objects merge member by member, anything else replaces.
// Unknown properties, read-only ones, type changes and values outside a
// property's @Redfish.AllowableValues are refused, as a real BMC does.
std::optional<RedfishMessage> merge_into(json& target, const json& patch, const std::string& path, bool allow_new) {
    for (const auto& [key, value] : patch.items()) {
        const std::string prop = path.empty() ? key : path + "/" + key;
        if (starts_with(key, "@odata.") || (path.empty() && key == "Id") ||
            key.find("@Redfish.AllowableValues") != std::string::npos) {
            return messages::property_not_writable(prop);
        }
        if (starts_with(key, "@")) {  // annotations such as @Redfish.SettingsApplyTime
            target[key] = value;
            continue;
        }
        auto it = target.find(key);
        if (it == target.end()) {
            if (!allow_new) return messages::property_unknown(prop);
            target[key] = value;
            continue;
        }
        if (it->is_object() && value.is_object()) {
            if (auto err = merge_into(*it, value, prop, allow_new)) return err;
            continue;
        }
        if (!it->is_null() && !value.is_null() && json_kind(*it) != json_kind(value)) {
            return messages::property_value_type_error(value.dump(), prop);
        }
        auto allowed = target.find(key + "@Redfish.AllowableValues");
        if (allowed != target.end() && allowed->is_array() && value.is_string() &&
            std::find(allowed->begin(), allowed->end(), value) == allowed->end()) {
            return messages::property_value_not_in_list(value.get<std::string>(), prop);
        }
        // Enums the schema fixes, for trees that list no allowable values.
        if (allowed == target.end() && value.is_string()) {
            static const std::map<std::string, std::vector<std::string>> kEnums = {
                {"BootSourceOverrideEnabled", {"Disabled", "Once", "Continuous"}},
                {"BootSourceOverrideMode", {"Legacy", "UEFI"}},
            };
            auto known = kEnums.find(key);
            if (known != kEnums.end() && std::find(known->second.begin(), known->second.end(),
                                                   value.get<std::string>()) == known->second.end()) {
                return messages::property_value_not_in_list(value.get<std::string>(), prop);
            }
        }
        *it = value;
    }
    return std::nullopt;
}

std::string sessions_link(const MockupTree& tree) {
    auto root = tree.resources.find("/redfish/v1");
    if (root == tree.resources.end()) return {};
    const json& r = root->second;
    if (r.contains("Links") && r["Links"].contains("Sessions") && r["Links"]["Sessions"].contains("@odata.id") &&
        r["Links"]["Sessions"]["@odata.id"].is_string()) {
        return normalize_uri(r["Links"]["Sessions"]["@odata.id"].get<std::string>());
    }
    if (r.contains("SessionService")) return "/redfish/v1/SessionService/Sessions";
    return {};  // no sessions offered: Basic only
}

std::chrono::seconds session_timeout(const MockupTree& tree, const BmcConfig& config) {
    if (config.session_timeout) return *config.session_timeout;
    for (const auto& [uri, body] : tree.resources) {
        if (lower_ascii(uri) == "/redfish/v1/sessionservice" && body.contains("SessionTimeout") &&
            body["SessionTimeout"].is_number_integer() && body["SessionTimeout"].get<long long>() > 0) {
            return std::chrono::seconds(body["SessionTimeout"].get<long long>());
        }
    }
    return std::chrono::minutes(30);
}

std::string canonical_dir(const std::string& dir) {
    std::error_code ec;
    auto p = std::filesystem::weakly_canonical(dir, ec);
    return ec ? dir : p.string();
}

}  // namespace

BmcState::BmcState(const BmcTemplate& base, BmcConfig config)
    : config_(std::move(config)),
      mockup_(canonical_dir(base.tree.dir)),
      store_(base.store),
      sessions_(config_.session_limit, session_timeout(base.tree, config_), config_.clock),
      faults_(config_.faults) {
    sessions_uri_ = sessions_link(base.tree);
    if (!sessions_uri_.empty()) {
        if (auto canon = store_.resolve(sessions_uri_)) sessions_uri_ = *canon;
        // The captured sessions belong to someone else's BMC: their tokens
        // are unknown, and they would count against the session limit.
        const std::string prefix = lower_ascii(sessions_uri_) + "/";
        for (const auto& uri : store_.uris()) {
            if (starts_with(lower_ascii(uri), prefix)) store_.erase(uri);
        }
    }
    seed_update_service();
    // Every VirtualMedia gets InsertMedia/EjectMedia (DMTF's tree lacks them).
    for (const auto& uri : store_.uris()) {
        const json& body = store_.body(uri);
        if (is_virtual_media(body)) store_.seed(uri, with_media_actions(body, uri));
    }
}

std::shared_ptr<const BmcTemplate> BmcState::prepare(const MockupTree& captured, std::optional<VendorMode> vendor) {
    // The tree as the vendor serves it (vendor_mode.h).
    const VendorMode mode = vendor.value_or(infer_vendor_mode(captured));
    MockupTree tree = captured;
    shape_tree(tree, mode);
    ResourceStore store(tree);
    return std::make_shared<const BmcTemplate>(BmcTemplate{std::move(tree), std::move(store), mode});
}

Result<std::unique_ptr<BmcState>> BmcState::open(const MockupTree& captured, BmcConfig config) {
    const auto base = prepare(captured, config.vendor);
    return open(*base, std::move(config));
}

Result<std::unique_ptr<BmcState>> BmcState::open(const BmcTemplate& base, BmcConfig config) {
    config.vendor = base.vendor;
    std::unique_ptr<BmcState> state(new BmcState(base, std::move(config)));
    if (!state->config_.state_file.empty()) {
        auto snap = load_state_file(state->config_.state_file);
        if (!snap) return snap.error();
        if (*snap) {
            const StateSnapshot& s = **snap;
            if (s.mockup != state->mockup_) {
                return make_error(
                    "bmc", "bmc.state_mockup_mismatch",
                    state->config_.state_file + " was written over mockup " + s.mockup + ", not " + state->mockup_);
            }
            for (const auto& [uri, body] : s.resources) {
                auto canon = state->store_.resolve(uri);
                if (!canon) {
                    return make_error("bmc", "bmc.state_mockup_mismatch",
                                      state->config_.state_file + " holds " + uri + ", which the mockup lacks");
                }
                state->store_.replace(*canon, body);
            }
            if (auto loaded = state->load_emulator_state(s.emulator); !loaded) {
                return make_error("bmc", "bmc.state_malformed",
                                  state->config_.state_file + ": " + loaded.error().message);
            }
        }
    }
    for (const auto& uri : state->store_.uris()) {
        const json& body = state->store_.body(uri);
        auto actions = body.find("Actions");
        if (actions == body.end() || !actions->is_object()) continue;
        for (const auto& [name, action] : actions->items()) {
            if (!starts_with(name, "#") || !action.is_object() || !action.contains("target") ||
                !action["target"].is_string()) {
                continue;
            }
            state->actions_[lower_ascii(normalize_uri(action["target"].get<std::string>()))] = {uri, name};
        }
    }
    state->settings_objects_ = find_settings_objects(state->store_);
    return state;
}

BmcResponse BmcState::handle(const BmcRequest& request) {
    const std::string uri = normalize_uri(request.path);
    if (uri == "/kiln-bmc" || starts_with(uri, "/kiln-bmc/")) {
        std::lock_guard<std::mutex> lock(mu_);
        return control(request, uri);
    }
    // A pushed image was read already (hashed, header kept): its spool file
    // goes whatever the answer.
    struct SpoolCleanup {
        std::string path;
        ~SpoolCleanup() {
            std::error_code ec;
            if (!path.empty()) std::filesystem::remove(path, ec);
        }
    } spool{request.multipart ? request.multipart->file_path : std::string()};

    ++redfish_requests_;
    // Faults first, as a misbehaving BMC would: before any lock or parsing.
    if (const unsigned ms = faults_.latency_ms()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    switch (faults_.admit()) {
        case Admission::drop: {
            BmcResponse r;
            r.drop_connection = true;
            return r;
        }
        case Admission::unavailable: {
            const unsigned s = faults_.retry_after_s();
            BmcResponse r = error_response(503, messages::service_temporarily_unavailable(s));
            r.headers.emplace_back("Retry-After", std::to_string(s));
            return r;
        }
        case Admission::serve:
            break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    BmcResponse r;
    try {
        const double t = now();
        if (advance(t)) {
            if (auto failed = commit()) return *failed;
        }
        undo_.clear();
        if (t < unavailable_until_) {
            // The emulated BMC is restarting.
            const unsigned s = static_cast<unsigned>(std::max(1.0, std::ceil(unavailable_until_ - t)));
            r = error_response(503, messages::service_temporarily_unavailable(s));
            r.headers.emplace_back("Retry-After", std::to_string(s));
            return r;
        }
        r = dispatch(request, uri);
    } catch (const std::exception& e) {
        // A tree or state with an unexpected shape: answer, never crash.
        for (auto& [u, body] : undo_) store_.replace(u, std::move(body));
        r = error_response(500, messages::internal_error(e.what()));
    }
    undo_.clear();
    return r;
}

BmcResponse BmcState::dispatch(const BmcRequest& request, const std::string& uri) {
    const std::string& m = request.method;
    const bool read = m == "GET" || m == "HEAD";
    if (uri == "/redfish") {
        if (!read) return method_not_allowed(m, uri, "GET, HEAD");
        return json_response(200, {{"v1", "/redfish/v1/"}});
    }
    if (!starts_with(lower_ascii(uri), "/redfish/v1"))
        return error_response(404, messages::resource_missing_at_uri(uri));

    const std::string luri = lower_ascii(uri);
    const bool is_public =
        (read && (luri == "/redfish/v1" || luri == "/redfish/v1/$metadata" || luri == "/redfish/v1/odata")) ||
        (m == "POST" && !sessions_uri_.empty() && luri == lower_ascii(sessions_uri_));
    if (!is_public) {
        if (auto refusal = authenticate(request, uri)) return *refusal;
    }
    if (read) {
        auto expand = request.query.find("$expand");
        return expand == request.query.end() ? get(uri) : get_expanded(uri, expand->second);
    }
    if (m == "PATCH") return patch(request, uri);
    if (m == "POST") return post(request, uri);
    if (m == "DELETE") return remove(uri);
    return method_not_allowed(m, uri, "GET, HEAD, PATCH, POST, DELETE");
}

std::optional<BmcResponse> BmcState::authenticate(const BmcRequest& request, const std::string& uri) {
    const std::string token = request.header("X-Auth-Token");
    if (!token.empty()) {
        if (sessions_.use_token(token)) return std::nullopt;
        return error_response(401, messages::no_valid_session());
    }
    if (auto creds = basic_credentials(request.header("Authorization"))) {
        const auto colon = creds->find(':');
        if (colon != std::string::npos && same_secret(creds->substr(0, colon), config_.user) &&
            same_secret(creds->substr(colon + 1), config_.password)) {
            return std::nullopt;
        }
        BmcResponse r = error_response(401, messages::resource_at_uri_unauthorized(uri));
        r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"kiln-bmc\"");
        return r;
    }
    BmcResponse r = error_response(401, messages::no_valid_session());
    r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"kiln-bmc\"");
    return r;
}

std::optional<std::string> BmcState::session_id_of(const std::string& uri) const {
    if (sessions_uri_.empty()) return std::nullopt;
    const std::string prefix = lower_ascii(sessions_uri_) + "/";
    const std::string luri = lower_ascii(uri);
    if (!starts_with(luri, prefix)) return std::nullopt;
    std::string id = uri.substr(prefix.size());
    if (id.empty() || id.find('/') != std::string::npos) return std::nullopt;
    return id;
}

json BmcState::session_view(const Session& s) const {
    return {{"@odata.id", sessions_uri_ + "/" + s.id},
            {"@odata.type", "#Session.v1_0_0.Session"},
            {"Id", s.id},
            {"Name", "User Session"},
            {"Description", "Manager User Session"},
            {"UserName", s.user}};
}

json BmcState::sessions_collection_view() {
    json body = json::object();
    if (auto canon = store_.resolve(sessions_uri_)) body = store_.view(*canon);
    body["@odata.id"] = sessions_uri_;
    if (!body.contains("@odata.type")) body["@odata.type"] = "#SessionCollection.SessionCollection";
    if (!body.contains("Name")) body["Name"] = "Session Collection";
    json members = json::array();
    for (const auto& s : sessions_.list()) members.push_back({{"@odata.id", sessions_uri_ + "/" + s.id}});
    body["Members@odata.count"] = members.size();
    body["Members"] = std::move(members);
    body.erase("@odata.etag");
    return body;
}

BmcResponse BmcState::get(const std::string& uri) {
    if (!sessions_uri_.empty() && lower_ascii(uri) == lower_ascii(sessions_uri_)) {
        json body = sessions_collection_view();
        return json_response(200, body, content_etag(body));
    }
    if (auto id = session_id_of(uri)) {
        auto s = sessions_.find_id(*id);
        if (!s) return error_response(404, messages::resource_missing_at_uri(uri));
        json body = session_view(*s);
        return json_response(200, body, content_etag(body));
    }
    if (auto task = task_get(uri, now())) return *task;
    if (auto job = dell_job_get(uri, now())) return *job;
    if (auto doc = store_.resolve_document(uri)) {
        BmcResponse r;
        r.content_type = "application/xml";
        r.body = store_.document(*doc);
        return r;
    }
    auto canon = store_.resolve(uri);
    if (!canon) return error_response(404, messages::resource_missing_at_uri(uri));
    if (config_.power && *canon == power_system_uri_) {
        auto power = config_.power->power_state();
        if (!power) return error_response(500, messages::internal_error(power.error().message));
        json body = store_.view(*canon);
        body["PowerState"] = *power;
        body.erase("@odata.etag");
        const std::string tag = content_etag(body);
        if (store_.body(*canon).contains("@odata.etag") || store_.view(*canon).contains("@odata.etag")) {
            body["@odata.etag"] = tag;
        }
        return json_response(200, body, tag);
    }
    return json_response(200, store_.view(*canon), store_.etag(*canon));
}

BmcResponse BmcState::get_expanded(const std::string& uri, const std::string& expand_value) {
    auto root = store_.resolve("/redfish/v1");
    auto parsed = parse_expand(expand_value, root ? store_.view(*root) : json());
    if (auto* refusal = std::get_if<ExpandRefusal>(&parsed)) return error_response(refusal->status, refusal->message);
    BmcResponse plain = get(uri);
    if (plain.status != 200 || plain.content_type.rfind("application/json", 0) != 0) return plain;
    const json body = json::parse(plain.body);
    const double t = now();
    auto fetch = [&](const std::string& member) -> std::optional<json> {
        // Not a poll: expanding a task list must not count as reading each task.
        auto r = task_get(member, t, false);
        BmcResponse got = r ? *r : get(member);
        if (got.status != 200 || got.content_type.rfind("application/json", 0) != 0) return std::nullopt;
        return json::parse(got.body);
    };
    json out = expand(body, std::get<ExpandRequest>(parsed), fetch);
    return json_response(200, out, content_etag(out));
}

Result<json> BmcState::parse_body(const BmcRequest& request, BmcResponse* refusal) const {
    if (request.body.size() > config_.max_body_bytes) {
        *refusal = error_response(413, messages::payload_too_large());
        return make_error("bmc", "bmc.json", "request body too large");
    }
    if (request.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
    auto body = parse_json(request.body, JsonLimits{config_.max_body_bytes, 32}, "request body");
    if (!body) {
        *refusal = error_response(400, messages::malformed_json(body.error().message));
        return body.error();
    }
    if (!body->is_object()) {
        *refusal = error_response(400, messages::malformed_json("the body is not a JSON object"));
        return make_error("bmc", "bmc.json", "not an object");
    }
    return body;
}

BmcResponse BmcState::patch(const BmcRequest& request, const std::string& uri) {
    if (session_id_of(uri) || (!sessions_uri_.empty() && lower_ascii(uri) == lower_ascii(sessions_uri_))) {
        return method_not_allowed("PATCH", uri, "GET, HEAD, POST, DELETE");
    }
    auto canon = store_.resolve(uri);
    if (!canon) return error_response(404, messages::resource_missing_at_uri(uri));
    const json& current = store_.body(*canon);
    if (current.contains("Members")) return method_not_allowed("PATCH", uri, "GET, HEAD");
    // A Bios resource with a settings object (linked, or Lenovo's
    // <Bios>/Pending) is read-only: its changes go there. One without (AMI)
    // takes the PATCH itself.
    bool direct_bios = false;
    if (starts_with(current.value("@odata.type", ""), "#Bios.")) {
        std::string target = current.contains("@Redfish.Settings") ? "(none)" : "";
        for (const auto& [settings, owner] : settings_objects_)
            if (owner == *canon) target = settings;
        if (!target.empty())
            return method_not_allowed("PATCH", uri + " (PATCH its settings object " + target + ")", "GET, HEAD");
        direct_bios = true;
    }
    const std::string if_match = request.header("If-Match");
    if (!if_match.empty() && !if_match_ok(if_match, store_.etag(*canon))) {
        BmcResponse r = error_response(412, messages::precondition_failed());
        r.headers.emplace_back("ETag", store_.etag(*canon));
        return r;
    }
    BmcResponse refusal;
    auto body = parse_body(request, &refusal);
    if (!body) return refusal;

    json updated = current;
    bool settings_object = false;
    if (auto owner = settings_objects_.find(*canon); owner != settings_objects_.end()) {
        settings_object = true;
        const json& owner_body = store_.body(owner->second);
        if (body->contains("Attributes") && owner_body.contains("Attributes")) {
            if (auto err = check_pending_attributes(owner_body["Attributes"], (*body)["Attributes"])) {
                return error_response(400, *err);
            }
        }
        if (!updated.contains("Attributes")) updated["Attributes"] = json::object();
    }
    // The settings object holds only what is pending, so names new to it
    // are fine once checked against the Bios above.
    json rest = *body;
    if (settings_object && rest.contains("Attributes") && rest["Attributes"].is_object()) {
        for (const auto& [name, value] : rest["Attributes"].items()) updated["Attributes"][name] = value;
        rest.erase("Attributes");
    }
    // AMI: checked now, applied at the next POST; until then the Bios reads
    // as before, as the real firmware's does.
    if (direct_bios && rest.contains("Attributes")) {
        if (auto err = check_pending_attributes(current.value("Attributes", json::object()), rest["Attributes"]))
            return error_response(400, *err);
        json& waiting = direct_bios_pending_[*canon];
        if (!waiting.is_object()) waiting = json::object();
        for (const auto& [name, value] : rest["Attributes"].items()) waiting[name] = value;
        rest.erase("Attributes");
    }
    if (auto err = merge_into(updated, rest, "", false)) return error_response(400, *err);

    const std::string type = current.value("@odata.type", "");
    const bool followed = starts_with(type, "#ComputerSystem.") || starts_with(type, "#VirtualMedia.");
    change(*canon, std::move(updated));
    if (followed)
        if (auto task = follow_write(request, *body, "PATCH")) return *task;  // commits
    if (auto failed = commit()) return *failed;
    return json_response(200, store_.view(*canon), store_.etag(*canon));
}

BmcResponse BmcState::post(const BmcRequest& request, const std::string& uri) {
    if (!sessions_uri_.empty() && lower_ascii(uri) == lower_ascii(sessions_uri_)) return login(request);
    auto action = actions_.find(lower_ascii(uri));
    if (action != actions_.end()) {
        const auto& [resource, name] = action->second;
        if (name == "#ComputerSystem.Reset") return reset_system(request, resource);
        if (name == "#UpdateService.SimpleUpdate") return simple_update(request, uri, resource);
        if (name == "#VirtualMedia.InsertMedia") return media_action(request, resource, true);
        if (name == "#VirtualMedia.EjectMedia") return media_action(request, resource, false);
        return error_response(501, messages::action_not_supported(name));
    }
    if (!push_uri_.empty() && lower_ascii(uri) == lower_ascii(push_uri_)) return push_update(request);
    if (auto done = dell_job_action(request, uri)) return *done;
    if (store_.resolve(uri) || session_id_of(uri)) return method_not_allowed("POST", uri, "GET, HEAD, PATCH");
    return error_response(404, messages::resource_missing_at_uri(uri));
}

BmcResponse BmcState::remove(const std::string& uri) {
    if (auto id = session_id_of(uri)) {
        if (!sessions_.remove_id(*id)) return error_response(404, messages::resource_missing_at_uri(uri));
        BmcResponse r;
        r.status = 204;
        return r;
    }
    if (!store_.resolve(uri)) return error_response(404, messages::resource_missing_at_uri(uri));
    return method_not_allowed("DELETE", uri, "GET, HEAD, PATCH");
}

BmcResponse BmcState::login(const BmcRequest& request) {
    BmcResponse refusal;
    auto body = parse_body(request, &refusal);
    if (!body) return refusal;
    for (const char* field : {"UserName", "Password"}) {
        if (!body->contains(field)) return error_response(400, messages::property_missing(field));
        if (!(*body)[field].is_string()) {
            return error_response(400, messages::property_value_type_error((*body)[field].dump(), field));
        }
    }
    if (!same_secret((*body)["UserName"].get<std::string>(), config_.user) ||
        !same_secret((*body)["Password"].get<std::string>(), config_.password)) {
        return error_response(401, messages::resource_at_uri_unauthorized(sessions_uri_));
    }
    sessions_.set_limit(faults_.session_limit().value_or(config_.session_limit));
    auto session = sessions_.create(config_.user);
    if (!session) {
        if (session.error().code == "bmc.session_limit") return error_response(503, messages::session_limit_exceeded());
        return error_response(500, messages::internal_error(session.error().message));
    }
    BmcResponse r = json_response(201, session_view(*session));
    r.headers.emplace_back("X-Auth-Token", session->token);
    r.headers.emplace_back("Location", sessions_uri_ + "/" + session->id);
    return r;
}

BmcResponse BmcState::reset_system(const BmcRequest& request, const std::string& system_uri) {
    const std::string action = "ComputerSystem.Reset";
    BmcResponse refusal;
    auto body = parse_body(request, &refusal);
    if (!body) return refusal;
    if (!body->contains("ResetType"))
        return error_response(400, messages::action_parameter_missing(action, "ResetType"));
    if (!(*body)["ResetType"].is_string()) {
        return error_response(
            400, messages::action_parameter_value_not_in_list((*body)["ResetType"].dump(), "ResetType", action));
    }
    const std::string type = (*body)["ResetType"].get<std::string>();
    const json& system = store_.body(system_uri);

    json action_info = nullptr;
    json reset_action = json::object();
    if (system.contains("Actions") && system["Actions"].contains("#ComputerSystem.Reset")) {
        reset_action = system["Actions"]["#ComputerSystem.Reset"];
    }
    if (reset_action.is_object() && reset_action.contains("@Redfish.ActionInfo")) {
        json link = {{"@odata.id", reset_action["@Redfish.ActionInfo"]}};
        if (auto info = resolve_link(store_, link)) action_info = store_.body(*info);
    }
    const auto allowed = allowed_reset_types(system, action_info);
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), type) == allowed.end()) {
        return error_response(400, messages::action_parameter_value_not_in_list(type, "ResetType", action));
    }
    const bool backed = config_.power && system_uri == power_system_uri_;
    std::string power_now = system.value("PowerState", "On");
    if (backed) {
        auto p = config_.power->power_state();
        if (!p) return error_response(500, messages::internal_error(p.error().message));
        power_now = *p;
    }
    auto outcome = plan_reset(power_now, type);
    if (!outcome) return error_response(400, messages::action_parameter_value_not_in_list(type, "ResetType", action));
    if (backed) {
        // The real VM first: when libvirt refuses, nothing here changes.
        if (auto done = config_.power->reset(type); !done) {
            return error_response(500, messages::internal_error(done.error().message));
        }
    }

    ++resets_;
    json updated = system;
    updated["PowerState"] = outcome->power_state;
    if (outcome->boots) {
        const std::string now = now_iso8601();
        last_boot_ = boot_record(updated, type, now);
        if (updated.contains("LastResetTime")) updated["LastResetTime"] = now;
        // A one-time override is used up by the boot it steered (when POST
        // ends and the boot starts: advance(), with --post-seconds).
        if (config_.post_seconds <= 0 && updated.contains("Boot") &&
            updated["Boot"].value("BootSourceOverrideEnabled", "") == "Once") {
            updated["Boot"]["BootSourceOverrideEnabled"] = "Disabled";
        }
        if (config_.post_seconds > 0) {
            // Applied when this POST ends (advance()): until then the Bios
            // shows the old values and the settings are still pending.
            post_system_ = system_uri;
            post_until_ = this->now() + config_.post_seconds;
        } else {
            apply_bios_at_post(system_uri, now);
        }
    }
    change(system_uri, std::move(updated));
    // Updates staged OnReset take effect in this POST (at its end, with
    // --post-seconds: advance()).
    if (outcome->boots && config_.post_seconds <= 0) apply_pending_updates(now());
    if (config_.reset_task_seconds > 0) {
        // A BMC that follows the reset as a task: 202 with its monitor.
        UpdateTask task;
        task.kind = kResetTaskKind;
        task.action_uri = request.path;
        task.reset_type = type;
        task.duration = config_.reset_task_seconds;
        task.started = now();
        return accept_task(std::move(task), false);  // commits
    }
    if (auto failed = commit()) return *failed;
    BmcResponse r;
    r.status = 204;
    return r;
}

void BmcState::apply_bios_at_post(const std::string& system_uri, const std::string& time) {
    if (auto bios = apply_pending_bios(store_, system_uri, time)) {
        change(bios->bios_uri, std::move(bios->bios));
        change(bios->settings_uri, std::move(bios->settings));
    }
    if (auto bios_uri = resolve_link(store_, store_.body(system_uri).value("Bios", json(nullptr)))) {
        if (auto waiting = direct_bios_pending_.find(*bios_uri); waiting != direct_bios_pending_.end()) {
            json bios = store_.body(*bios_uri);
            for (const auto& [name, value] : waiting->second.items()) bios["Attributes"][name] = value;
            change(*bios_uri, std::move(bios));
            direct_bios_pending_.erase(waiting);
        }
    }
}

json BmcState::boot_record(const json& system, const std::string& reset_type, const std::string& time) {
    json record = {{"time", time}, {"reset_type", reset_type}, {"source", "BootOrder"}, {"media", nullptr}};
    const json boot = system.value("Boot", json::object());
    const std::string enabled = boot.value("BootSourceOverrideEnabled", "Disabled");
    if (enabled == "Once" || enabled == "Continuous") {
        record["source"] = boot.value("BootSourceOverrideTarget", "None");
    }
    // The media that boot read, when it booted from virtual media.
    const std::string source = record["source"];
    if (source == "Cd" || source == "Usb" || source == "Floppy") {
        for (const auto& uri : store_.uris()) {
            const json& body = store_.body(uri);
            if (!is_virtual_media(body) || !body.value("Inserted", false)) continue;
            const json types = body.value("MediaTypes", json::array());
            const bool cd = std::find(types.begin(), types.end(), "CD") != types.end() ||
                            std::find(types.begin(), types.end(), "DVD") != types.end();
            if ((source == "Cd") == cd) {
                record["media"] = {{"uri", uri}, {"image", body.value("Image", "")}};
                break;
            }
        }
    }
    return record;
}

BmcResponse BmcState::media_action(const BmcRequest& request, const std::string& media_uri, bool insert) {
    BmcResponse refusal;
    auto params = parse_body(request, &refusal);
    if (!params) return refusal;
    json updated = store_.body(media_uri);
    if (insert) {
        if (auto err = insert_media(updated, *params)) return error_response(400, *err);
    } else {
        if (!params->empty()) {
            return error_response(
                400, messages::action_parameter_not_supported(params->begin().key(), "VirtualMedia.EjectMedia"));
        }
        eject_media(updated);
    }
    change(media_uri, std::move(updated));
    if (auto task = follow_write(request, *params, insert ? "VirtualMedia.InsertMedia" : "VirtualMedia.EjectMedia"))
        return *task;  // commits
    if (auto failed = commit()) return *failed;
    BmcResponse r;
    r.status = 204;
    return r;
}

std::optional<BmcResponse> BmcState::follow_write(const BmcRequest& request, const json& params,
                                                  const std::string& kind) {
    if (config_.media_task_seconds <= 0) return std::nullopt;
    UpdateTask task;
    task.kind = kind;
    task.action_uri = request.path;
    task.http_operation = request.method;
    // The Payload is readable by anyone who can read the task: no secrets.
    json shown = params.is_object() ? params : json::object();
    shown.erase("Password");
    task.payload = shown.dump();
    task.duration = config_.media_task_seconds;
    task.started = now();
    return accept_task(std::move(task), false);
}

// /kiln-bmc/...: the emulator's own control endpoint (docs/kiln-bmc.md).
BmcResponse BmcState::control(const BmcRequest& request, const std::string& uri) {
    const std::string& m = request.method;
    if (uri == "/kiln-bmc/faults") {
        if (m == "GET") return json_response(200, to_json(faults_.current()));
        if (m == "DELETE") {
            faults_.clear();
            return json_response(200, to_json(faults_.current()));
        }
        if (m == "PATCH" || m == "PUT" || m == "POST") {
            BmcResponse refusal;
            auto body = parse_body(request, &refusal);
            if (!body) return refusal;
            if (auto set = faults_.update(*body); !set) {
                return error_response(400, messages::malformed_json(set.error().message));
            }
            return json_response(200, to_json(faults_.current()));
        }
        return method_not_allowed(m, uri, "GET, PATCH, PUT, POST, DELETE");
    }
    if (uri == "/kiln-bmc/state") {
        if (m != "GET") return method_not_allowed(m, uri, "GET");
        if (advance(now())) {
            if (auto failed = commit()) return *failed;
        }
        undo_.clear();
        json out = emulator_state();
        out.erase("tasks");
        out.erase("next_task");
        out["faults"] = to_json(faults_.current());
        out["sessions"] = sessions_.list().size();
        out["requests"] = redfish_requests_.load();
        return json_response(200, out);
    }
    return error_response(404, messages::resource_missing_at_uri(uri));
}

void BmcState::change(const std::string& uri, json body) {
    if (!undo_.count(uri)) undo_[uri] = store_.body(uri);
    store_.replace(uri, std::move(body));
}

std::optional<BmcResponse> BmcState::commit() {
    if (config_.state_file.empty()) return std::nullopt;
    auto written = write_state_file(config_.state_file, StateSnapshot{mockup_, store_.changed(), emulator_state()});
    if (written) return std::nullopt;
    for (auto& [uri, body] : undo_) store_.replace(uri, std::move(body));
    undo_.clear();
    return error_response(500, messages::internal_error(written.error().message));
}

std::optional<json> BmcState::resource(const std::string& uri) {
    std::lock_guard<std::mutex> lock(mu_);
    auto canon = store_.resolve(uri);
    if (!canon) return std::nullopt;
    return store_.view(*canon);
}

std::string BmcState::etag(const std::string& uri) {
    std::lock_guard<std::mutex> lock(mu_);
    auto canon = store_.resolve(uri);
    return canon ? store_.etag(*canon) : std::string();
}

size_t BmcState::session_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.list().size();
}

}  // namespace kiln::bmc
