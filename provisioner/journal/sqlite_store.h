// SQLite journal: one file, WAL mode, safe against kill -9 at any point.
#pragma once

#include <memory>
#include <string>

#include "provisioner/journal/store.h"

namespace kiln::journal {

struct SqliteOptions {
    bool read_only = false;  // `kiln plan`/`status`: open only if it exists, write nothing
    int busy_timeout_ms = 10000;
};

// Creates the file (and its folder) unless read_only. A read-only open of a
// missing file fails with code "journal.missing".
Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path, const SqliteOptions& options);

}  // namespace kiln::journal
