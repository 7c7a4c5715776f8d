// Which journal a command uses, opened one way for every command: the
// SQLite file (the default), or a PostgreSQL database named by `--store` or
// the fleet's [store] table. Commands hold a RunGuard while they write.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "provisioner/core/secret.h"
#include "provisioner/journal/pg_store.h"
#include "provisioner/journal/run_lock.h"
#include "provisioner/journal/store.h"

namespace kiln::journal {

struct StoreSpec {
    std::string url;  // postgresql://...; "" = the SQLite file at sqlite_path
    std::string sqlite_path;
    std::optional<Secret> password;  // PostgreSQL only
    // PostgreSQL only: how long to keep connecting again after the server
    // went away (PgOptions::reconnect_for); unset: its default.
    std::optional<std::chrono::milliseconds> reconnect_for;

    bool postgres() const { return !url.empty(); }
    // The URL (never with a password: check_store_url refuses those) or the path.
    const std::string& where() const { return postgres() ? url : sqlite_path; }
};

// Opens the journal for writing (creating the file or the schema).
Result<std::unique_ptr<Store>> open_store(const StoreSpec& spec);
// Opens it to read; a journal that does not exist yet is a null store.
Result<std::unique_ptr<Store>> open_store_reader(const StoreSpec& spec);

// The lock a writing run holds for its whole length (one run at a time).
class RunGuard {
public:
    static Result<RunGuard> acquire(const StoreSpec& spec);
    // Whether a run holds it now; false when that cannot be told.
    static bool held(const StoreSpec& spec);

private:
    explicit RunGuard(std::variant<RunLock, PgRunLock> lock) : lock_(std::move(lock)) {}
    std::variant<RunLock, PgRunLock> lock_;
};

}  // namespace kiln::journal
