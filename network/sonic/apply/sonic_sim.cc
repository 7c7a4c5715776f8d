#include "network/sonic/apply/sonic_sim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "network/sonic/json_patch.h"

namespace kiln::network::sonic {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

bool valid_name(const std::string& n) {
    if (n.empty() || n.size() > 128 || n[0] == '.') return false;
    for (unsigned char c : n)
        if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

Result<json> read_json(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("sonic-sim", "sonic_sim.io", fmt::format("cannot read {}", path));
    std::stringstream ss;
    ss << in.rdbuf();
    json doc = json::parse(ss.str(), nullptr, false);
    if (doc.is_discarded()) return make_error("sonic-sim", "sonic_sim.io", fmt::format("{} is not JSON", path));
    return doc;
}

// Temp file, fsync, rename: readers see the old or the new file, never half.
Status write_atomic(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    {
        Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (fd.get() < 0) return make_error("sonic-sim", "sonic_sim.io", fmt::format("cannot write {}", tmp));
        size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
            if (n <= 0) return make_error("sonic-sim", "sonic_sim.io", fmt::format("cannot write {}", tmp));
            done += static_cast<size_t>(n);
        }
        if (::fsync(fd.get()) != 0) return make_error("sonic-sim", "sonic_sim.io", fmt::format("cannot sync {}", tmp));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        return make_error("sonic-sim", "sonic_sim.io", fmt::format("cannot rename {}", tmp));
    return ok_status();
}

}  // namespace

std::vector<std::string> split_command_line(const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    std::string t;
    while (in >> t) out.push_back(t);
    return out;
}

SonicSim::SonicSim(std::string state_dir, const YangValidator& validator)
    : state_dir_(std::move(state_dir)), validator_(validator) {}

int SonicSim::run(std::vector<std::string> args, std::istream& in, std::ostream& out, std::ostream& err) {
    if (!args.empty() && args[0] == "sudo") args.erase(args.begin());
    if (args.empty()) {
        err << "Usage: config COMMAND ... | sonic-cfggen -d --print-data\n";
        return 2;
    }
    // One command at a time, as SONiC's config lock does.
    Fd lock(::open((state_dir_ + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.get() < 0 || ::flock(lock.get(), LOCK_EX) != 0) {
        err << "Error: cannot lock " << state_dir_ << "\n";
        return 1;
    }
    const std::string& cmd = args[0];
    if (cmd == "cat" && args.size() == 2) return cat_device_file(args[1], out, err);
    if (cmd == "sonic-cfggen") {
        if (args.size() == 3 && args[1] == "-d" && args[2] == "--print-data") return print_data(out, err);
        err << "sonic-cfggen: only -d --print-data is emulated\n";
        return 2;
    }
    if (cmd != "config") {
        err << cmd << ": command not found\n";
        return 127;
    }
    const std::string sub = args.size() > 1 ? args[1] : "";
    if (sub == "list-checkpoints" && args.size() == 2) return list_checkpoints(out);
    if (args.size() != 3) {
        err << "Usage: config apply-patch FILE | checkpoint NAME | rollback NAME | delete-checkpoint NAME | "
               "list-checkpoints\n";
        return 2;
    }
    if (sub == "apply-patch") return apply_patch(args[2], in, out, err);
    if (sub == "checkpoint") return checkpoint(args[2], out, err);
    if (sub == "rollback") return rollback(args[2], out, err);
    if (sub == "delete-checkpoint") return delete_checkpoint(args[2], out, err);
    err << "Error: No such command \"" << sub << "\".\n";
    return 2;
}

int SonicSim::print_data(std::ostream& out, std::ostream& err) {
    auto db = read_json(state_dir_ + "/config_db.json");
    if (!db) {
        err << "Error: " << db.error().message << "\n";
        return 1;
    }
    out << db->dump(4) << "\n";
    return 0;
}

int SonicSim::cat_device_file(const std::string& path, std::ostream& out, std::ostream& err) {
    // Only the SKU files under /usr/share/sonic/device/, from DIR/device/.
    const std::string prefix = "/usr/share/sonic/device/";
    const bool inside = path.rfind(prefix, 0) == 0 && path.find("..") == std::string::npos;
    std::ifstream f(inside ? state_dir_ + "/device/" + path.substr(prefix.size()) : std::string(), std::ios::binary);
    if (!inside || !f) {
        err << "cat: " << path << ": No such file or directory\n";
        return 1;
    }
    out << f.rdbuf();
    return 0;
}

namespace {

// SONiC's config updater treats PORT|*|lanes as create-only: set with the
// port, never changed or removed while the port stays (generic_config_updater's
// CreateOnlyFilter). The first violation, or empty.
std::string create_only_violation(const json& before, const json& after) {
    const json& b = before.value("PORT", json::object());
    const json& a = after.value("PORT", json::object());
    for (auto p = b.begin(); p != b.end(); ++p) {
        auto q = a.find(p.key());
        if (q == a.end() || !p->is_object() || !q->is_object()) continue;
        const json was = p->value("lanes", json());
        const json now = q->value("lanes", json());
        if (was != now)
            return fmt::format("/PORT/{}/lanes is create-only: it was {} and the patch makes it {}", p.key(),
                               was.is_null() ? "absent" : was.dump(), now.is_null() ? "absent" : now.dump());
    }
    return {};
}

// The ports SONiC's config updater takes down and up for this change: it
// requires PORT|<port> admin_status "down" while a row keyed by the port
// changes in these tables, so on an up port it adds a move to down and one
// back to up (generic_config_updater's RequiredValueIdentifier; a port whose
// admin_status is absent counts as down, its default there).
std::vector<std::string> ports_cycled(const json& before, const json& after) {
    static const char* const kTables[] = {"BUFFER_PG",    "BUFFER_PORT_EGRESS_PROFILE_LIST",
                                          "BUFFER_QUEUE", "BUFFER_PORT_INGRESS_PROFILE_LIST",
                                          "PORT_QOS_MAP", "QUEUE"};
    std::set<std::string> touched;
    for (const char* t : kTables) {
        const json& b = before.value(t, json::object());
        const json& a = after.value(t, json::object());
        std::set<std::string> keys;
        for (auto e = b.begin(); e != b.end(); ++e) keys.insert(e.key());
        for (auto e = a.begin(); e != a.end(); ++e) keys.insert(e.key());
        for (const auto& k : keys)
            if (b.value(k, json()) != a.value(k, json())) touched.insert(k.substr(0, k.find('|')));
    }
    std::vector<std::string> out;
    const json& ports = before.value("PORT", json::object());
    for (const auto& p : touched)
        if (auto e = ports.find(p); e != ports.end() && e->is_object() && e->value("admin_status", "") == "up")
            out.push_back(p);
    return out;
}

}  // namespace

int SonicSim::apply_patch(const std::string& file, std::istream& in, std::ostream& out, std::ostream& err) {
    std::string text;
    if (file == "-" || file == "/dev/stdin") {
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    } else {
        std::ifstream f(file, std::ios::binary);
        if (!f) {
            err << "Error: Invalid value for \"PATCH_FILE_PATH\": Path \"" << file << "\" does not exist.\n";
            return 2;
        }
        std::stringstream ss;
        ss << f.rdbuf();
        text = ss.str();
    }
    const json patch = json::parse(text, nullptr, false);
    if (patch.is_discarded()) {
        err << "Error: the patch is not valid JSON\n";
        return 1;
    }
    auto current = read_json(state_dir_ + "/config_db.json");
    if (!current) {
        err << "Error: " << current.error().message << "\n";
        return 1;
    }
    auto next = json_patch_apply(*current, patch);
    if (!next) {
        err << "Error: " << next.error().message << "\n";
        return 1;
    }
    if (const std::string v = create_only_violation(*current, *next); !v.empty()) {
        err << "Error: the patch modifies a create-only field: " << v << "\n";
        return 1;
    }
    auto shape = ConfigDb::from_json(*next);
    if (!shape) {
        err << "Error: the patched config is not CONFIG_DB shaped: " << shape.error().message << "\n";
        return 1;
    }
    const auto issues = validator_.check(*next);
    if (!issues.empty()) {
        err << "Error: the patched config fails YANG validation: " << issues.front().str();
        for (size_t i = 1; i < issues.size(); ++i) err << "; " << issues[i].str();
        err << "\n";
        return 1;
    }
    if (Status s = write_atomic(state_dir_ + "/config_db.json", next->dump(4) + "\n"); !s) {
        err << "Error: " << s.error().message << "\n";
        return 1;
    }
    // What a real switch would show as link flaps, for the tests to compare
    // with the ports kiln's plan said would go down.
    if (const auto cycled = ports_cycled(*current, *next); !cycled.empty()) {
        std::ofstream log(state_dir_ + "/port_flaps.log", std::ios::app);
        for (const auto& p : cycled) log << p << "\n";
    }
    out << "Patch applied successfully.\n";
    return 0;
}

int SonicSim::checkpoint(const std::string& name, std::ostream& out, std::ostream& err) {
    if (!valid_name(name)) {
        err << "Error: bad checkpoint name '" << name << "'\n";
        return 2;
    }
    auto db = read_json(state_dir_ + "/config_db.json");
    if (!db) {
        err << "Error: " << db.error().message << "\n";
        return 1;
    }
    std::error_code ec;
    fs::create_directories(state_dir_ + "/checkpoints", ec);
    if (Status s = write_atomic(state_dir_ + "/checkpoints/" + name + ".json", db->dump(4) + "\n"); !s) {
        err << "Error: " << s.error().message << "\n";
        return 1;
    }
    out << "Checkpoint created successfully.\n";
    return 0;
}

int SonicSim::rollback(const std::string& name, std::ostream& out, std::ostream& err) {
    if (!valid_name(name)) {
        err << "Error: bad checkpoint name '" << name << "'\n";
        return 2;
    }
    auto db = read_json(state_dir_ + "/checkpoints/" + name + ".json");
    if (!db) {
        err << "Error: Checkpoint '" << name << "' does not exist\n";
        return 1;
    }
    if (Status s = write_atomic(state_dir_ + "/config_db.json", db->dump(4) + "\n"); !s) {
        err << "Error: " << s.error().message << "\n";
        return 1;
    }
    out << "Config rolled back successfully.\n";
    return 0;
}

int SonicSim::delete_checkpoint(const std::string& name, std::ostream& out, std::ostream& err) {
    if (!valid_name(name)) {
        err << "Error: bad checkpoint name '" << name << "'\n";
        return 2;
    }
    std::error_code ec;
    if (!fs::remove(state_dir_ + "/checkpoints/" + name + ".json", ec)) {
        err << "Error: Checkpoint '" << name << "' does not exist\n";
        return 1;
    }
    out << "Checkpoint deleted successfully.\n";
    return 0;
}

int SonicSim::list_checkpoints(std::ostream& out) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_dir_ + "/checkpoints", ec)) {
        const auto& p = e.path();
        if (p.extension() == ".json") names.push_back(p.stem().string());
    }
    std::sort(names.begin(), names.end());
    out << json(names).dump(4) << "\n";
    return 0;
}

}  // namespace kiln::network::sonic
