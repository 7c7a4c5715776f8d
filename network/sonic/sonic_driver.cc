#include "network/sonic/sonic_driver.h"

#include <algorithm>
#include <ctime>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "network/config_tree.h"
#include "network/sonic/config_db.h"
#include "network/sonic/json_patch.h"
#include "network/sonic/managed_scope.h"
#include "network/sonic/switch_facts.h"
#include "provisioner/core/json_limits.h"

namespace kiln::network::sonic {

namespace {

using nlohmann::json;

// A CONFIG_DB dump is a few MB at most; anything larger is not one.
constexpr size_t kMaxDump = 64u << 20;

Error driver_error(const std::string& sw, const std::string& code, const std::string& message, bool transient = false) {
    return make_error("network", code, fmt::format("switch {}: {}", sw, message), transient);
}

// The field as people read it: "mtu", "queue 3 scheduler", "DSCP_TO_TC_MAP|ROCE 26".
std::string field_label(const std::string& table, const std::string& key, const std::string& field) {
    const auto parts = split_key(key);
    if (table == "QUEUE" && parts.size() == 2) return fmt::format("queue {} {}", parts[1], field);
    if (table == "BUFFER_PG" && parts.size() == 2) return fmt::format("pg {} {}", parts[1], field);
    if (is_port_table(table)) return table == "PORT" ? field : fmt::format("{} {}", table, field);
    return fmt::format("{}|{} {}", table, key, field);
}

// Tables whose change takes the port down and up: SONiC's config updater
// sets the port admin down around any change to these rows and up again
// after (generic_config_updater's RequiredValueIdentifier).
bool flaps_port(const std::string& table) {
    return table == "QUEUE" || table == "BUFFER_PG" || table == "BUFFER_QUEUE" || table == "PORT_QOS_MAP" ||
           table == "BUFFER_PORT_INGRESS_PROFILE_LIST" || table == "BUFFER_PORT_EGRESS_PROFILE_LIST";
}

// CONFIG_DB's tree: tables, entries, fields; every level owned once
// narrowed to kiln's scope (managed_scope.h): an entry kiln renders is owned
// whole, an entry the scope keeps that kiln does not render goes.
TreeDiffOptions config_db_tree() {
    TreeDiffOptions o;
    o.owned_from_depth = 0;
    o.label = [](const std::vector<std::string>& path, ConfigChange& c) {
        const std::string table = !path.empty() ? path[0] : "";
        const std::string key = path.size() > 1 ? path[1] : "";
        const std::string field = path.size() > 2 ? path[2] : "";
        if (is_port_table(table) && !key.empty()) c.port = split_key(key).at(0);
        if (table == "CABLE_LENGTH") c.port = field;  // CABLE_LENGTH|AZURE {port: length}
        c.disruptive = !c.port.empty() && c.port != "global" && flaps_port(table);
        c.path = fmt::format("{}|{}/{}", table, key, field);
        c.field = field_label(table, key, field);
    };
    return o;
}

}  // namespace

SonicDriver::SonicDriver(std::string name, std::shared_ptr<CommandRunner> switch_runner, SonicDriverOptions options)
    : name_(std::move(name)), runner_(std::move(switch_runner)), options_(std::move(options)) {}

Result<std::unique_ptr<SonicDriver>> SonicDriver::from_switch(const config::Switch& sw,
                                                              std::shared_ptr<CommandRunner> local,
                                                              SonicDriverOptions options) {
    if (sw.os != "sonic") return driver_error(sw.name, "network.wrong_os", fmt::format("runs {}, not sonic", sw.os));
    auto target = SshTarget::from_address(sw.address);
    if (!target) return driver_error(sw.name, target.error().code, target.error().message);
    if (sw.known_hosts.empty())
        return driver_error(sw.name, "network.ssh_no_known_hosts",
                            "set known_hosts (a known_hosts file with the switch's host key): kiln checks SSH "
                            "host keys strictly");
    if (sw.password && sw.ssh_key.empty())
        return driver_error(sw.name, "network.ssh_password_unsupported",
                            "password login over SSH is not supported: set ssh_key (kiln's SSH is key-only)");
    target->username = sw.username.empty() ? "admin" : sw.username;
    target->identity_file = sw.ssh_key;
    target->known_hosts = sw.known_hosts;
    target->connect_timeout = options.connect_timeout;
    target->ssh_program = options.ssh_program;
    if (!local) local = std::make_shared<ProcessRunner>();
    auto runner = std::make_shared<SshRunner>(std::move(*target), std::move(local));
    return std::make_unique<SonicDriver>(sw.name, std::move(runner), std::move(options));
}

Result<json> SonicDriver::render(const network::RoceProfile& profile, const std::vector<Port>& ports) const {
    auto db = render_roce(profile, ports, options_.render);
    if (!db) return driver_error(name_, db.error().code, db.error().message);
    return db->json();
}

Result<CommandResult> SonicDriver::remote(std::vector<std::string> argv, std::chrono::seconds timeout,
                                          std::string stdin_data) {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.timeout = timeout;
    spec.stdin_data = std::move(stdin_data);
    spec.max_output = kMaxDump;
    return runner_->run(spec);
}

std::vector<std::string> SonicDriver::config_cmd(std::initializer_list<std::string> args) const {
    std::vector<std::string> argv;
    if (options_.sudo) argv.push_back("sudo");
    argv.push_back("config");
    argv.insert(argv.end(), args);
    return argv;
}

std::string SonicDriver::next_checkpoint_name() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return fmt::format("kiln-{}-{}", buf, ++checkpoints_);
}

Result<json> SonicDriver::read_config_db() {
    auto r = remote({"sonic-cfggen", "-d", "--print-data"}, options_.read_timeout);
    if (!r) return driver_error(name_, r.error().code, r.error().message);
    if (!r->success())
        return driver_error(name_, "network.read_failed",
                            "sonic-cfggen -d --print-data failed: " + describe_remote_failure(*r),
                            ssh_failed(*r) || r->timed_out);
    if (r->truncated) return driver_error(name_, "network.read_failed", "sonic-cfggen output exceeds 64 MiB");
    // CONFIG_DB of a big switch is a few MiB: room for it, not for anything.
    auto doc = parse_json_limited(r->out, "sonic-cfggen -d --print-data", {64u << 20, 64, 8'000'000}, "network");
    if (!doc || !doc->is_object())
        return driver_error(
            name_, "network.read_failed",
            doc ? std::string("sonic-cfggen -d --print-data did not print a JSON object") : doc.error().message);
    return doc;
}

// The CONFIG_DB dump, with what else kiln needs of the switch under "_kiln":
// in the traditional buffer model, the SKU's pg_profile_lookup.ini.
Result<json> SonicDriver::read_state() {
    auto doc = read_config_db();
    if (!doc) return doc;
    json facts = json::object();
    const json& meta = doc->value("DEVICE_METADATA", json::object()).value("localhost", json::object());
    // The SKU's headroom table matters only where buffermgrd sizes PGs from it.
    if (meta.value("buffer_model", std::string("traditional")) == "traditional") {
        const std::string path = pg_lookup_path(meta.value("platform", ""), meta.value("hwsku", ""));
        facts["pg_lookup_path"] = path;
        if (path.empty()) {
            facts["pg_lookup_error"] = "DEVICE_METADATA|localhost has no usable platform and hwsku";
        } else {
            auto r = remote({"cat", path}, options_.read_timeout);
            if (!r) return driver_error(name_, r.error().code, r.error().message);
            if (ssh_failed(*r) || r->timed_out)
                return driver_error(name_, "network.read_failed", "cat " + path + ": " + describe_remote_failure(*r),
                                    true);
            if (r->success())
                facts["pg_lookup"] = r->out;
            else
                facts["pg_lookup_error"] = describe_remote_failure(*r);
        }
    }
    (*doc)[kFactsKey] = std::move(facts);
    return doc;
}

json SonicDriver::project_running(const json& state, const std::vector<Port>& ports) const {
    std::vector<std::string> names;
    names.reserve(ports.size());
    for (const auto& p : ports) names.push_back(p.name);
    json state_db = state;
    json facts = {{"pg_lookup", nullptr}};
    if (auto k = state_db.find(kFactsKey); k != state_db.end()) {
        if (k->is_object()) facts.update(*k);
        state_db.erase(k);
    }
    json out = select_managed(state_db, names, options_.render);
    facts["config_db"] = std::move(state_db);
    out[kFactsKey] = std::move(facts);
    return out;
}

Result<json> SonicDriver::render_for(const network::RoceProfile& profile, const std::vector<Port>& ports,
                                     const json& running) const {
    const SonicFacts facts = facts_from_running(running);
    RenderOptions opt = options_.render;
    // Hand-built running configs (tests) carry no facts: render without buffers as before.
    if (running.is_object() && running.contains(kFactsKey)) opt.facts = &facts;
    auto db = render_roce(profile, ports, opt);
    if (!db) return driver_error(name_, db.error().code, db.error().message);
    return db->json();
}

namespace {

// One validator per process: loading SONiC's models takes a while, and
// libyang's context is shared, so checks take turns.
std::mutex& validator_mutex() {
    static std::mutex m;
    return m;
}

Result<std::shared_ptr<const YangValidator>> default_validator() {
    static std::shared_ptr<const YangValidator> loaded;
    static std::string load_error;
    if (!loaded && load_error.empty()) {
        auto v = YangValidator::load();
        if (v)
            loaded = std::make_shared<const YangValidator>(std::move(*v));
        else
            load_error = v.error().message;
    }
    if (loaded) return loaded;
    return make_error("network", "network.yang_models", load_error);
}

// The tables the models know: a real switch has many more (BGP, VLANs...),
// which kiln neither changes nor can judge.
json known_tables(const json& db, const std::vector<std::string>& tables) {
    json out = json::object();
    for (auto t = db.begin(); t != db.end(); ++t)
        if (std::binary_search(tables.begin(), tables.end(), t.key())) out[t.key()] = *t;
    return out;
}

}  // namespace

Status SonicDriver::check(const json& desired, const json& running) const {
    const SonicFacts facts = facts_from_running(running);
    if (auto ports = desired.find("PORT"); ports != desired.end())
        for (auto p = ports->begin(); p != ports->end(); ++p) {
            auto lanes = p->find("lanes");
            auto have = facts.lanes.find(p.key());
            if (lanes == p->end() || have == facts.lanes.end() || *lanes == have->second) continue;
            return driver_error(name_, "network.create_only",
                                fmt::format("PORT|{} lanes are {} on the switch and {} in the fleet: SONiC creates a "
                                            "port's lanes with the port and refuses to change them; fix the fleet's "
                                            "lanes (or break the port out on the switch first)",
                                            p.key(), have->second, lanes->get<std::string>()));
        }
    auto k = running.find(kFactsKey);
    if (k == running.end() || !k->contains("config_db")) return ok_status();
    auto merged = json_patch_apply((*k)["config_db"], patch_for(desired, running));
    if (!merged)
        return driver_error(name_, "network.patch_invalid", "the patch does not apply: " + merged.error().message);
    std::shared_ptr<const YangValidator> validator = options_.validator;
    std::lock_guard<std::mutex> lock(validator_mutex());
    if (!validator) {
        auto v = default_validator();
        if (!v)
            return driver_error(
                name_, "network.yang_models",
                "cannot check the change against SONiC's YANG models before applying it: " + v.error().message);
        validator = *v;
    }
    const std::vector<std::string> tables = validator->tables();
    std::set<std::string> before;
    for (const auto& i : validator->check(known_tables((*k)["config_db"], tables))) before.insert(i.str());
    std::vector<std::string> added;
    for (const auto& i : validator->check(known_tables(*merged, tables)))
        if (!before.count(i.str())) added.push_back(i.str());
    if (added.empty()) return ok_status();
    std::string text;
    for (size_t i = 0; i < added.size() && i < 5; ++i) text += (i ? "; " : "") + added[i];
    if (added.size() > 5) text += fmt::format("; and {} more", added.size() - 5);
    return driver_error(name_, "network.yang_invalid",
                        fmt::format("the switch would refuse this change (SONiC's YANG models, on the merged "
                                    "config): {}; nothing was applied",
                                    text));
}

json SonicDriver::patch_for(const json& desired, const json& running) const {
    return json_diff(scope_to_desired(running, desired), desired);
}

std::vector<ConfigChange> SonicDriver::diff(const json& desired, const json& running) const {
    std::vector<ConfigChange> out = diff_trees(desired, scope_to_desired(running, desired), config_db_tree());
    // A port that is not admin up has no link to lose: the updater leaves it as it is.
    if (auto k = running.find(kFactsKey); k != running.end() && k->contains("config_db")) {
        const json& ports = (*k)["config_db"].value("PORT", json::object());
        for (auto& c : out)
            if (c.disruptive) {
                auto p = ports.find(c.port);
                c.disruptive = p != ports.end() && p->is_object() && p->value("admin_status", "") == "up";
            }
    }
    return out;
}

Status SonicDriver::apply(const json& desired, const json& running) {
    const json patch = patch_for(desired, running);
    if (patch.empty()) return ok_status();
    return apply_patch(patch);
}

Status SonicDriver::apply_patch(const json& patch) {
    const std::string cp = next_checkpoint_name();
    auto r = remote(config_cmd({"checkpoint", cp}), options_.read_timeout);
    if (!r) return driver_error(name_, r.error().code, r.error().message);
    if (!r->success())
        return driver_error(
            name_, "network.checkpoint_failed",
            fmt::format("config checkpoint {} failed: {}; nothing was changed", cp, describe_remote_failure(*r)),
            ssh_failed(*r) || r->timed_out);

    auto drop_checkpoint = [&] { (void)remote(config_cmd({"delete-checkpoint", cp}), options_.read_timeout); };

    auto a = remote(config_cmd({"apply-patch", "/dev/stdin"}), options_.apply_timeout, patch.dump(2) + "\n");
    if (a && a->success()) {
        drop_checkpoint();
        return ok_status();
    }
    const std::string why = a ? describe_remote_failure(*a) : a.error().message;
    auto rb = remote(config_cmd({"rollback", cp}), options_.apply_timeout);
    if (!rb || !rb->success()) {
        const std::string rb_why = rb ? describe_remote_failure(*rb) : rb.error().message;
        Error e = driver_error(name_, "network.rollback_failed",
                               fmt::format("config apply-patch failed ({}) and rollback to checkpoint {} failed ({}): "
                                           "the switch may be partly changed; checkpoint {} is kept",
                                           why, cp, rb_why, cp));
        return e;
    }
    drop_checkpoint();
    return driver_error(name_, "network.apply_failed",
                        fmt::format("config apply-patch failed: {}; rolled back to checkpoint {}", why, cp),
                        a && (ssh_failed(*a) || a->timed_out));
}

}  // namespace kiln::network::sonic
