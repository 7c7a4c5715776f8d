// A top-level table of fleet.toml that a stage module owns ([handover]),
// read by the module's own reader. The loader knows such a table only by
// its registration (LoadOptions::tables, filled from the stage registry):
// it hands the reader the table when the file has one, and keeps what the
// reader returns in Fleet::tables, where the module reads it back typed.
#pragma once

#include <any>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/core/secret.h"

namespace kiln::config {

class TableReader;  // toml_reader.h

// What a table's reader may use besides the table itself.
class TableScope {
public:
    TableScope(std::string fleet_dir, std::vector<Secret>& secrets)
        : fleet_dir_(std::move(fleet_dir)), secrets_(secrets) {}

    // The fleet file's folder: relative paths resolve against it.
    const std::string& fleet_dir() const { return fleet_dir_; }
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
};

// http(s)://host[:port][/path] with no credentials in it: "" when `url` is
// one, else what is wrong, never echoing the URL (it may carry a password).
std::string http_url_problem(const std::string& url);

}  // namespace kiln::config
