// A top-level table of fleet.toml that a stage module owns ([handover]),
// read by the module's own reader. The loader knows such a table only by
// its registration (LoadOptions::tables, filled from the stage registry):
// it hands the reader the table when the file has one, and keeps what the
// reader returns in Fleet::tables, where the module reads it back typed.
#pragma once

#include <any>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/secret.h"

namespace kiln::config {

// One problem in the fleet file, at its position.
struct Diagnostic {
    SourcePos pos;
    std::string key;          // dotted path, e.g. "nodes[3].bmc.password"
    std::string message;      // what was expected / found
    std::string str() const;  // "FILE:LINE:COL: KEY: MESSAGE"
};

class TableReader;  // toml_reader.h

// What a table's reader may use besides the table itself.
class TableScope {
public:
    TableScope(std::string fleet_dir, std::vector<Secret>& secrets)
        : fleet_dir_(std::move(fleet_dir)), secrets_(secrets) {}

    // The fleet file's folder: relative paths resolve against it.
    const std::string& fleet_dir() const { return fleet_dir_; }
    // `p` resolved against the fleet file's folder (absolute paths as given).
    std::string path(const std::string& p) const;
    // The secret reference at `key` ("env:NAME" or "file:PATH"), or an error
    // at its position that never carries the value. Each one read is kept
    // with the table, so that whatever must scrub the fleet's secrets from
    // its output finds them without knowing the table
    // (TableValue::secrets, in Fleet::tables).
    std::optional<Secret> secret(TableReader& r, const std::string& key);

private:
    std::string fleet_dir_;
    std::vector<Secret>& secrets_;
};

struct ConfigTable {
    std::string key;  // the top-level table's name, e.g. "handover"
    // Reads the table into its typed value; reports every problem through
    // the reader (FILE:LINE:COL, key). The loader then reports the keys the
    // reader never asked for.
    std::function<std::any(TableReader& table, TableScope& scope)> read;
    // For a table of named profiles ([firmware.NAME]) that each node picks
    // one of by a key of its own (node.firmware = "NAME"): that key, read in
    // [defaults] and each [[nodes]] and checked against `names` of the value
    // read ("no firmware profile 'x'; defined: a, b"). Empty: nodes name
    // nothing in this table.
    std::string node_key;
    std::function<std::vector<std::string>(const std::any& value)> names;
    // Whether Fleet::nodes_picking indexes the nodes by their pick in this
    // table: for a module that asks it of every node (a smoke ring's members).
    bool group_nodes = false;
    // A check of the whole fleet, run once every node has been read and the
    // fleet indexed, whether or not the file has this table: what one
    // table's reader cannot see (a ring of nodes that must fit [limits]).
    // Problems go to `errors` at the position of what causes them.
    std::function<void(const Fleet& fleet, std::vector<Diagnostic>& errors)> check_fleet;
};

// Each [KEY.NAME] sub-table of `table`: a name that is not a profile name
// (letters, digits, '.', '_', '-') or a value that is not a table is an
// error; each other one is read by `each` with its own reader, finished
// after (its unread keys are errors).
void each_named_table(TableReader& table, const std::function<void(const std::string& name, TableReader& r)>& each);

// A table of named profiles, read one by one with `read_one`, whose value is
// Profiles<P> and whose names a node picks by `node_key`.
template <class P>
using Profiles = std::map<std::string, P>;

template <class P>
ConfigTable named_profiles_table(std::string key, std::string node_key,
                                 std::function<P(const std::string& name, TableReader&, TableScope&)> read_one) {
    ConfigTable t;
    t.key = std::move(key);
    t.node_key = std::move(node_key);
    t.read = [read_one = std::move(read_one)](TableReader& table, TableScope& scope) -> std::any {
        Profiles<P> out;
        each_named_table(table, [&](const std::string& name, TableReader& r) { out[name] = read_one(name, r, scope); });
        return out;
    };
    t.names = [](const std::any& value) {
        std::vector<std::string> names;
        if (const auto* m = std::any_cast<Profiles<P>>(&value))
            for (const auto& [name, p] : *m) names.push_back(name);
        return names;
    };
    return t;
}

// The profile `name` in a module's table of named profiles `key`, to change
// it (tests; a CLI override), or nullptr when there is none.
template <class P>
P* mutable_profile(Fleet& fleet, const std::string& key, const std::string& name) {
    // Fleet::profile's lookup; the fleet is the caller's to change.
    return const_cast<P*>(std::as_const(fleet).template profile<P>(key, name));
}

// Adds (or replaces) a profile in the table `key`, for a fleet built in
// code (tests, benchmarks), creating the table when the fleet has none.
template <class P>
void add_profile(Fleet& fleet, const std::string& key, P profile) {
    auto& table = fleet.tables[key];
    if (!table.value.has_value()) table.value = Profiles<P>{};
    auto& all = std::any_cast<Profiles<P>&>(table.value);
    std::string name = profile.name;
    all[std::move(name)] = std::move(profile);
}

// 64 hex digits, either case: a SHA-256 as fleet files write it.
bool is_sha256_hex(const std::string& s);
// `p` resolved against the folder `dir` unless it is absolute, normalised.
std::string resolve_path(const std::string& dir, const std::string& p);
std::string ascii_lower(std::string s);
// A Linux interface name kiln can pass to ip, dcb and sysfs paths as is
// (1-15 of A-Z a-z 0-9 _ . -, not starting with '.' or '-').
bool is_linux_ifname(const std::string& s);

// http(s)://host[:port][/path] with no credentials in it: "" when `url` is
// one, else what is wrong, never echoing the URL (it may carry a password).
std::string http_url_problem(const std::string& url);

}  // namespace kiln::config
