// PostgreSQL journal: the same Store as the SQLite file, in a database that
// several kiln processes on several machines can share. Selected by
// `--store postgresql://...` or a fleet's [store] table; SQLite stays the
// default. The URL never carries a password: it comes from an env:/file:
// reference, so every message may name the URL as given.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "provisioner/core/secret.h"
#include "provisioner/journal/store.h"
#include "provisioner/journal/store_url.h"

namespace kiln::journal {

struct PgOptions {
    bool read_only = false;            // plan/status: create nothing, write nothing
    std::optional<Secret> password;    // resolved when connecting, never kept
    int connect_timeout_s = 10;        // every connection attempt
    int statement_timeout_ms = 30000;  // every statement (a wedged server is an error, not a hang)
    // How long an operation that finds the connection gone (a server
    // restart, a failover) keeps connecting again before it fails with
    // journal.unavailable. Zero: one attempt.
    std::chrono::milliseconds reconnect_for{std::chrono::seconds(60)};
};

// Connects, and (unless read_only) brings the schema to this kiln's version
// under an advisory lock, so concurrent openers migrate once. A read-only
// open of a database without kiln's schema fails with "journal.missing"; a
// schema newer than this kiln's with "journal.newer".
Result<std::unique_ptr<Store>> open_pg_store(const std::string& url, const PgOptions& options);

// `kiln apply` against PostgreSQL holds this for its whole run, as it holds
// RunLock on a journal file: a session advisory lock, dropped by the server
// when the holder's connection dies (kill -9, lost host).
class PgRunLock {
public:
    static Result<PgRunLock> acquire(const std::string& url, const PgOptions& options);
    // True when some session holds the lock now.
    static Result<bool> held(const std::string& url, const PgOptions& options);

    PgRunLock(PgRunLock&&) noexcept;
    PgRunLock& operator=(PgRunLock&&) = delete;
    PgRunLock(const PgRunLock&) = delete;
    ~PgRunLock();

private:
    struct Conn;
    explicit PgRunLock(std::unique_ptr<Conn> conn);
    std::unique_ptr<Conn> conn_;
};

}  // namespace kiln::journal
