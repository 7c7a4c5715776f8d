#include "provisioner/journal/sqlite_store.h"

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::journal {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

namespace {

// 2: the records table (published stage records). A journal at 1 is still
// read (read-only: no records yet); a writing open adds the table.
constexpr int kSchemaVersion = 2;
constexpr int kOldestReadable = 1;

// Small pages: a commit writes whole pages to the WAL, and our rows are a
// few hundred bytes, so 1 KiB pages write a quarter of the bytes per commit
// (only takes effect when the file is created).
constexpr int kPageSize = 1024;
// WAL frames (pages) after which the committing writer checkpoints the log
// back into the database: ~10 MiB. Each checkpoint costs two fsyncs, so
// rarer is cheaper; SQLite's default (1000) fsyncs every few hundred commits.
constexpr int kCheckpointFrames = 10000;

// Every statement is idempotent so an open always leaves the full schema,
// whatever an earlier (killed) open managed to do. run_id columns that can
// only come from begin_run reference runs; events and node_state may carry
// run-level data written before or outside a run, so they do not.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY, command TEXT NOT NULL, fleet_path TEXT NOT NULL, fleet_sha256 TEXT NOT NULL,
  kiln_version TEXT NOT NULL, status TEXT NOT NULL, started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS stage_results(
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), node TEXT NOT NULL, stage TEXT NOT NULL,
  input_hash TEXT NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL, attempts INTEGER NOT NULL,
  actions INTEGER NOT NULL, started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS stage_results_node ON stage_results(node);
CREATE TABLE IF NOT EXISTS verified(
  node TEXT NOT NULL, stage TEXT NOT NULL, input_hash TEXT NOT NULL, run_id INTEGER NOT NULL REFERENCES runs(id),
  verified_ms INTEGER NOT NULL, PRIMARY KEY(node, stage)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS actions(
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), node TEXT NOT NULL, stage TEXT NOT NULL,
  action_id TEXT NOT NULL, description TEXT NOT NULL, started_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL DEFAULT 0, outcome TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS actions_node ON actions(node);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, ts_ms INTEGER NOT NULL, node TEXT NOT NULL, stage TEXT NOT NULL,
  kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_node ON events(node);
CREATE TABLE IF NOT EXISTS node_state(
  node TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL, stage TEXT NOT NULL, error TEXT NOT NULL,
  updated_ms INTEGER NOT NULL, run_id INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records(
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, node TEXT NOT NULL, stage TEXT NOT NULL, kind TEXT NOT NULL,
  body_schema INTEGER NOT NULL, body TEXT NOT NULL, ts_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS records_node_kind ON records(node, kind, id);
)sql";

// Newest first. On one millisecond a stage row goes before its actions and
// events (it is written last), then newer rows before older ones.
constexpr const char* kHistory = R"sql(
SELECT ts, run_id, kind, stage, name, text, outcome, error FROM (
  SELECT CASE WHEN ended_ms <> 0 THEN ended_ms ELSE started_ms END AS ts, run_id, 'stage' AS kind, stage,
         outcome AS name, input_hash AS text, outcome, error, 2 AS kind_order, id
    FROM stage_results WHERE node = ?1
  UNION ALL
  SELECT started_ms, run_id, 'action', stage, action_id, description, outcome, error, 1, id
    FROM actions WHERE node = ?1
  UNION ALL
  SELECT ts_ms, run_id, 'event', stage, kind, message, '', '', 0, id
    FROM events WHERE node = ?1)
ORDER BY ts DESC, kind_order DESC, id DESC LIMIT ?2
)sql";

// Owns a connection. close_v2 so a stray unfinalized statement cannot make
// the close fail and leak the handle.
class Db {
public:
    Db() = default;
    explicit Db(sqlite3* db) : db_(db) {}
    Db(Db&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
    Db& operator=(Db&& o) noexcept {
        std::swap(db_, o.db_);
        return *this;
    }
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;
    ~Db() {
        if (db_) sqlite3_close_v2(db_);
    }
    sqlite3* get() const { return db_; }

private:
    sqlite3* db_ = nullptr;
};

// Owns a prepared statement.
class Stmt {
public:
    Stmt() = default;
    explicit Stmt(sqlite3_stmt* s) : s_(s) {}
    Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Stmt& operator=(Stmt&& o) noexcept {
        std::swap(s_, o.s_);
        return *this;
    }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    ~Stmt() {
        if (s_) sqlite3_finalize(s_);
    }
    sqlite3_stmt* get() const { return s_; }

private:
    sqlite3_stmt* s_ = nullptr;
};

// One use of a cached statement: binds parameters in order and resets the
// statement however the call leaves, so the next use starts clean. Text is
// bound without a copy (SQLITE_STATIC): the caller's strings outlive the
// Call, and the reset drops the bindings before they could dangle.
class Call {
public:
    explicit Call(Stmt& s) : s_(s.get()) {}
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    ~Call() {
        sqlite3_reset(s_);
        sqlite3_clear_bindings(s_);
    }

    Call& bind(const std::string& v) {
        note(sqlite3_bind_text(s_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
        return *this;
    }
    Call& bind(int64_t v) {
        note(sqlite3_bind_int64(s_, ++n_, v));
        return *this;
    }
    Call& bind(int v) { return bind(static_cast<int64_t>(v)); }

    int step() { return rc_ != SQLITE_OK ? rc_ : sqlite3_step(s_); }

    std::string text(int col) const {
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
        return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
    }
    int64_t integer(int col) const { return sqlite3_column_int64(s_, col); }

private:
    void note(int rc) {
        if (rc_ == SQLITE_OK) rc_ = rc;
    }
    sqlite3_stmt* s_;
    int n_ = 0;
    int rc_ = SQLITE_OK;
};

// "cannot <what> in <path>: <sqlite's message>". Busy/locked means another
// process held the file past the busy timeout: worth a retry.
Error sqlite_error(sqlite3* db, const std::string& path, const std::string& code, const std::string& what) {
    const int rc = db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM;
    const int primary = rc & 0xff;
    const bool busy = primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
    std::string c = code;
    if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) c = "journal.unknown_run";
    if (busy) c = "journal.busy";
    const char* msg = db ? sqlite3_errmsg(db) : "out of memory";
    return make_error("journal", c, "cannot " + what + " in " + path + ": " + msg, busy);
}

// Runs one statement with no result rows (pragmas, DDL, transaction control).
bool exec(sqlite3* db, const char* sql) {
    return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

// Reads a single-value pragma; nullopt when the file cannot be read (not a
// database, locked past the timeout, ...).
std::optional<std::string> pragma(sqlite3* db, const char* sql) {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK) return std::nullopt;
    Stmt s(raw);
    if (sqlite3_step(s.get()) != SQLITE_ROW) return std::nullopt;
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
    return std::string(p ? p : "");
}

// Writes use group commit. Each write call queues its operation and waits;
// whichever caller finds no transaction in progress becomes the leader and
// runs everything queued in one transaction, each operation inside its own
// savepoint so a failing one undoes only itself. A call returns only after
// the COMMIT that holds its rows, so "returned" still means "survives kill
// -9". A lone caller pays one transaction per call, as without batching;
// many concurrent callers (the engine's workers) share the per-transaction
// cost (file locks, WAL frame writes), which dominates a small insert.
class SqliteStore : public Store {
public:
    SqliteStore(Db db, std::string path, bool read_only)
        : db_(std::move(db)), path_(std::move(path)), read_only_(read_only) {}

    // Statements are compiled once here and reused on every call.
    Status prepare_all() {
        struct Def {
            Stmt* stmt;
            const char* sql;
        };
        const Def defs[] = {
            {&begin_, "BEGIN IMMEDIATE"},
            {&commit_, "COMMIT"},
            {&rollback_, "ROLLBACK"},
            {&savepoint_, "SAVEPOINT op"},
            {&release_, "RELEASE op"},
            {&rollback_to_, "ROLLBACK TO op"},
            {&begin_run_,
             "INSERT INTO runs(command, fleet_path, fleet_sha256, kiln_version, status, started_ms) "
             "VALUES(?,?,?,?,'running',?)"},
            {&end_run_, "UPDATE runs SET status=?, ended_ms=? WHERE id=?"},
            {&runs_, "SELECT id, command, status, started_ms, ended_ms FROM runs ORDER BY id DESC LIMIT ?"},
            {&last_verified_, "SELECT input_hash FROM verified WHERE node=? AND stage=?"},
            {&record_stage_,
             "INSERT INTO stage_results(run_id, node, stage, input_hash, outcome, error, attempts, "
             "actions, started_ms, ended_ms) VALUES(?,?,?,?,?,?,?,?,?,?)"},
            {&upsert_verified_,
             "INSERT INTO verified(node, stage, input_hash, run_id, verified_ms) VALUES(?,?,?,?,?) "
             "ON CONFLICT(node, stage) DO UPDATE SET input_hash=excluded.input_hash, "
             "run_id=excluded.run_id, verified_ms=excluded.verified_ms"},
            {&forget_one_, "DELETE FROM verified WHERE node=? AND stage=?"},
            {&forget_all_, "DELETE FROM verified WHERE node=?"},
            {&begin_action_,
             "INSERT INTO actions(run_id, node, stage, action_id, description, started_ms) "
             "VALUES(?,?,?,?,?,?)"},
            {&end_action_, "UPDATE actions SET ended_ms=?, outcome=?, error=? WHERE id=?"},
            {&event_, "INSERT INTO events(run_id, ts_ms, node, stage, kind, message) VALUES(?,?,?,?,?,?)"},
            {&set_state_,
             "INSERT INTO node_state(node, state, detail, stage, error, updated_ms, run_id) "
             "VALUES(?,?,?,?,?,?,?) ON CONFLICT(node) DO UPDATE SET state=excluded.state, "
             "detail=excluded.detail, stage=excluded.stage, error=excluded.error, "
             "updated_ms=excluded.updated_ms, run_id=excluded.run_id"},
            {&states_, "SELECT node, state, detail, stage, error, updated_ms, run_id FROM node_state ORDER BY node"},
            {&history_, kHistory},
            {&stage_records_,
             "SELECT run_id, node, stage, input_hash, outcome, error, attempts, actions, started_ms, ended_ms "
             "FROM stage_results WHERE node=? ORDER BY started_ms, id"},
            {&put_record_,
             "INSERT INTO records(run_id, node, stage, kind, body_schema, body, ts_ms) VALUES(?,?,?,?,?,?,?)"},
            {&latest_record_,
             "SELECT run_id, node, stage, kind, body_schema, body, ts_ms FROM records WHERE node=? AND kind=? "
             "ORDER BY id DESC LIMIT 1"},
        };
        for (const auto& d : defs) {
            // A journal at schema 1, opened read-only, has no records table.
            if (!has_records_ && (d.stmt == &put_record_ || d.stmt == &latest_record_)) continue;
            sqlite3_stmt* s = nullptr;
            if (sqlite3_prepare_v3(db_.get(), d.sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
                return fail("journal.schema", "prepare statements");
            *d.stmt = Stmt(s);
        }
        return ok_status();
    }

    Result<int64_t> begin_run(const RunInfo& info) override {
        return write<int64_t>("start a run", [&]() -> Result<int64_t> {
            Call c(begin_run_);
            c.bind(info.command).bind(info.fleet_path).bind(info.fleet_sha256).bind(info.kiln_version).bind(now_ms());
            if (c.step() != SQLITE_DONE) return fail("journal.write", "start a run");
            return static_cast<int64_t>(sqlite3_last_insert_rowid(db_.get()));
        });
    }

    Status end_run(int64_t run_id, const std::string& status) override {
        return write<void>("end a run", [&]() -> Status {
            Call c(end_run_);
            c.bind(status).bind(now_ms()).bind(run_id);
            if (c.step() != SQLITE_DONE) return fail("journal.write", "end run " + std::to_string(run_id));
            if (sqlite3_changes(db_.get()) == 0)
                return make_error("journal", "journal.unknown_run",
                                  "cannot end run " + std::to_string(run_id) + " in " + path_ + ": no such run");
            return ok_status();
        });
    }

    Result<std::vector<RunSummary>> runs(int limit) override {
        return read<std::vector<RunSummary>>("list runs", [&]() -> Result<std::vector<RunSummary>> {
            Call c(runs_);
            c.bind(limit > 0 ? limit : -1);  // LIMIT -1: no limit
            std::vector<RunSummary> out;
            int rc;
            while ((rc = c.step()) == SQLITE_ROW)
                out.push_back({c.integer(0), c.text(1), c.text(2), c.integer(3), c.integer(4)});
            if (rc != SQLITE_DONE) return fail("journal.read", "list runs");
            return out;
        });
    }

    Result<std::optional<std::string>> last_verified_hash(const std::string& node, const std::string& stage) override {
        using R = std::optional<std::string>;
        return read<R>("read a verified hash", [&]() -> Result<R> {
            Call c(last_verified_);
            c.bind(node).bind(stage);
            const int rc = c.step();
            if (rc == SQLITE_ROW) return R(c.text(0));
            if (rc != SQLITE_DONE) return fail("journal.read", "read the verified hash of " + node + "/" + stage);
            return R();
        });
    }

    Status record_stage(const StageRecord& r) override {
        // Both statements run in one transaction (or savepoint): the result
        // row and the verified hash land together or not at all.
        return write<void>("record a stage", [&]() -> Status {
            const auto what = [&] { return "record stage " + r.node + "/" + r.stage; };
            {
                Call c(record_stage_);
                c.bind(r.run_id).bind(r.node).bind(r.stage).bind(r.input_hash).bind(r.outcome).bind(r.error);
                c.bind(r.attempts).bind(r.actions).bind(r.started_ms).bind(r.ended_ms);
                if (c.step() != SQLITE_DONE) return fail("journal.write", what());
            }
            if (r.outcome != "verified" && r.outcome != "skipped") return ok_status();
            Call c(upsert_verified_);
            c.bind(r.node).bind(r.stage).bind(r.input_hash).bind(r.run_id).bind(r.ended_ms ? r.ended_ms : now_ms());
            if (c.step() != SQLITE_DONE) return fail("journal.write", what());
            return ok_status();
        });
    }

    Status forget_verified(const std::string& node, const std::string& stage) override {
        return write<void>("forget verified hashes", [&]() -> Status {
            Call c(stage.empty() ? forget_all_ : forget_one_);
            c.bind(node);
            if (!stage.empty()) c.bind(stage);
            if (c.step() != SQLITE_DONE) return fail("journal.write", "forget verified hashes of " + node);
            return ok_status();
        });
    }

    Result<int64_t> begin_action(int64_t run_id, const std::string& node, const std::string& stage,
                                 const std::string& action_id, const std::string& description) override {
        return write<int64_t>("record an action", [&]() -> Result<int64_t> {
            Call c(begin_action_);
            c.bind(run_id).bind(node).bind(stage).bind(action_id).bind(description).bind(now_ms());
            if (c.step() != SQLITE_DONE) return fail("journal.write", "record action " + action_id + " of " + node);
            return static_cast<int64_t>(sqlite3_last_insert_rowid(db_.get()));
        });
    }

    Status end_action(int64_t row, const std::string& outcome, const std::string& error) override {
        return write<void>("end an action", [&]() -> Status {
            Call c(end_action_);
            c.bind(now_ms()).bind(outcome).bind(error).bind(row);
            const std::string what = "end action row " + std::to_string(row);
            if (c.step() != SQLITE_DONE) return fail("journal.write", what);
            if (sqlite3_changes(db_.get()) == 0)
                return make_error("journal", "journal.unknown_action",
                                  "cannot " + what + " in " + path_ + ": no such row");
            return ok_status();
        });
    }

    Status record_event(const EventRecord& e) override {
        return write<void>("record an event", [&]() -> Status {
            Call c(event_);
            c.bind(e.run_id).bind(e.ts_ms ? e.ts_ms : now_ms()).bind(e.node).bind(e.stage).bind(e.kind).bind(e.message);
            if (c.step() != SQLITE_DONE) return fail("journal.write", "record event " + e.kind);
            return ok_status();
        });
    }

    Status set_node_state(const NodeState& s) override {
        return write<void>("set a node state", [&]() -> Status {
            Call c(set_state_);
            c.bind(s.node).bind(s.state).bind(s.detail).bind(s.stage).bind(s.error);
            c.bind(s.updated_ms ? s.updated_ms : now_ms()).bind(s.run_id);
            if (c.step() != SQLITE_DONE) return fail("journal.write", "set the state of " + s.node);
            return ok_status();
        });
    }

    Result<std::vector<NodeState>> node_states() override {
        return read<std::vector<NodeState>>("read node states", [&]() -> Result<std::vector<NodeState>> {
            Call c(states_);
            std::vector<NodeState> out;
            int rc;
            while ((rc = c.step()) == SQLITE_ROW)
                out.push_back({c.text(0), c.text(1), c.text(2), c.text(3), c.text(4), c.integer(5), c.integer(6)});
            if (rc != SQLITE_DONE) return fail("journal.read", "read node states");
            return out;
        });
    }

    Result<std::vector<HistoryEntry>> history(const std::string& node, int limit) override {
        using R = std::vector<HistoryEntry>;
        return read<R>("read history", [&]() -> Result<R> {
            Call c(history_);
            c.bind(node).bind(limit > 0 ? limit : -1);
            R out;
            int rc;
            while ((rc = c.step()) == SQLITE_ROW)
                out.push_back(
                    {c.integer(0), c.integer(1), c.text(2), c.text(3), c.text(4), c.text(5), c.text(6), c.text(7)});
            if (rc != SQLITE_DONE) return fail("journal.read", "read the history of " + node);
            return out;
        });
    }

    Result<std::vector<StageRecord>> stage_records(const std::string& node) override {
        using R = std::vector<StageRecord>;
        return read<R>("read stage results", [&]() -> Result<R> {
            Call c(stage_records_);
            c.bind(node);
            R out;
            int rc;
            while ((rc = c.step()) == SQLITE_ROW)
                out.push_back({c.integer(0), c.text(1), c.text(2), c.text(3), c.text(4), c.text(5),
                               static_cast<int>(c.integer(6)), static_cast<int>(c.integer(7)), c.integer(8),
                               c.integer(9)});
            if (rc != SQLITE_DONE) return fail("journal.read", "read the stage results of " + node);
            return out;
        });
    }

    Status put_record(const NodeRecord& r) override {
        return write<void>("record a result", [&]() -> Status {
            Call c(put_record_);
            c.bind(r.run_id).bind(r.node).bind(r.stage).bind(r.kind).bind(r.schema).bind(r.body);
            c.bind(r.ts_ms ? r.ts_ms : now_ms());
            if (c.step() != SQLITE_DONE) return fail("journal.write", "record the " + r.kind + " of " + r.node);
            return ok_status();
        });
    }

    Result<std::optional<NodeRecord>> latest_record(const std::string& node, const std::string& kind) override {
        using R = std::optional<NodeRecord>;
        if (!has_records_) return R();
        return read<R>("read a record", [&]() -> Result<R> {
            Call c(latest_record_);
            c.bind(node).bind(kind);
            const int rc = c.step();
            if (rc == SQLITE_ROW)
                return R(NodeRecord{c.integer(0), c.text(1), c.text(2), c.text(3), static_cast<int>(c.integer(4)),
                                    c.text(5), c.integer(6)});
            if (rc != SQLITE_DONE) return fail("journal.read", "read the " + kind + " of " + node);
            return R();
        });
    }

    void set_has_records(bool on) { has_records_ = on; }

private:
    // One queued write: the caller's operation, and its outcome once the
    // transaction holding it has committed (or failed).
    struct Pending {
        const char* what;
        std::function<Status()> op;
        Status result;
        bool done = false;
        std::condition_variable wake;  // done, or it is this caller's turn to lead
    };

    Error internal(const char* what, const char* why) const {
        return make_error("journal", "journal.internal", std::string("cannot ") + what + " in " + path_ + ": " + why);
    }

    // Reads see every write that has returned; they share the connection, so
    // they wait for a transaction in progress.
    template <class T, class F>
    Result<T> read(const char* what, F&& body) {
        try {
            std::lock_guard<std::mutex> lock(db_mu_);
            return body();
        } catch (const std::exception& e) {  // allocation: never across the interface
            return internal(what, e.what());
        }
    }

    // Refuses writes on a read-only store; otherwise queues the operation
    // and returns its result (and value) after its transaction ends.
    template <class T, class F>
    Result<T> write(const char* what, F&& body) {
        if (read_only_)
            return make_error("journal", "journal.read_only",
                              std::string("cannot ") + what + " in " + path_ + ": the journal was opened read-only");
        try {
            if constexpr (std::is_void_v<T>) {
                return submit(what, body);
            } else {
                std::optional<T> value;
                Status s = submit(what, [&]() -> Status {
                    Result<T> r = body();
                    if (!r) return r.error();
                    value = std::move(r).value();
                    return ok_status();
                });
                if (!s) return s.error();
                return std::move(*value);
            }
        } catch (const std::exception& e) {
            return internal(what, e.what());
        }
    }

    Status submit(const char* what, std::function<Status()> op) {
        Pending p{what, std::move(op), {}, false, {}};
        std::unique_lock<std::mutex> lk(queue_mu_);
        queue_.push_back(&p);
        while (!p.done) {
            if (flushing_) {
                p.wake.wait(lk);
                continue;
            }
            // Lead: take everything queued so far, our own call included.
            flushing_ = true;
            std::vector<Pending*> batch;
            batch.swap(queue_);
            lk.unlock();
            run_batch(batch);
            lk.lock();
            flushing_ = false;
            // Wake only those finished, and hand the lead to the oldest
            // waiter: waking everyone would stampede on every commit.
            for (Pending* b : batch) {
                b->done = true;
                if (b != &p) b->wake.notify_one();
            }
            if (!queue_.empty()) queue_.front()->wake.notify_one();
        }
        return std::move(p.result);
    }

    // Runs a batch in one transaction. Never throws: a leader that threw
    // would leave every waiter blocked.
    void run_batch(const std::vector<Pending*>& batch) noexcept {
        const bool several = batch.size() > 1;
        auto run_one = [&](Pending& b) {
            try {
                b.result = b.op();
            } catch (const std::exception& e) {
                b.result = internal(b.what, e.what());
            }
        };
        try {
            std::lock_guard<std::mutex> lock(db_mu_);
            if (Status s = step_once(begin_, batch.front()->what); !s) {
                for (Pending* b : batch) b->result = s;
                return;
            }
            for (Pending* b : batch) {
                if (!several) {
                    run_one(*b);
                    break;
                }
                if (Status s = step_once(savepoint_, b->what); !s) {
                    b->result = s;
                    continue;
                }
                run_one(*b);
                if (sqlite3_get_autocommit(db_.get())) {
                    // SQLite dropped the whole transaction (disk full, I/O
                    // error): nothing in this batch was written.
                    const Error e = b->result ? fail("journal.write", b->what) : b->result.error();
                    for (Pending* o : batch) o->result = e;
                    return;
                }
                if (!b->result) (void)step_once(rollback_to_, b->what);  // undo only this operation
                if (Status s = step_once(release_, b->what); !s && b->result) b->result = s;
            }
            if (!several && !batch.front()->result) {
                rollback();
                return;
            }
            if (Status s = step_once(commit_, batch.front()->what); !s) {
                for (Pending* b : batch)
                    if (b->result) b->result = s;
                rollback();
            }
        } catch (...) {
            // Only allocation or the mutex can throw here; fail what is not done.
            for (Pending* b : batch)
                if (b->result) b->result = make_error("journal", "journal.internal", "cannot write " + path_);
            if (sqlite3_get_autocommit(db_.get()) == 0) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        }
    }

    Status step_once(Stmt& s, const char* what) {
        Call c(s);
        if (c.step() != SQLITE_DONE) return fail("journal.write", what);
        return ok_status();
    }

    void rollback() {
        if (sqlite3_get_autocommit(db_.get()) == 0) (void)step_once(rollback_, "roll back");
    }

    Error fail(const std::string& code, const std::string& what) const {
        return sqlite_error(db_.get(), path_, code, what);
    }

    std::mutex db_mu_;  // the connection and its statements
    Db db_;             // declared before the statements: they are finalized first
    std::string path_;
    bool read_only_;
    Stmt begin_, commit_, rollback_, savepoint_, release_, rollback_to_, begin_run_, end_run_, runs_, last_verified_,
        record_stage_, upsert_verified_, forget_one_, forget_all_, begin_action_, end_action_, event_, set_state_,
        states_, history_, stage_records_, put_record_, latest_record_;
    bool has_records_ = true;  // false: a schema-1 journal opened read-only

    std::mutex queue_mu_;  // queue_, flushing_ and every Pending's done
    std::vector<Pending*> queue_;
    bool flushing_ = false;
};

// Refuses a journal written by a newer kiln: its schema may mean things this
// one would misread or damage.
Status check_version(sqlite3* db, const std::string& path, int* version) {
    auto v = pragma(db, "PRAGMA user_version");
    if (!v) return sqlite_error(db, path, "journal.open", "read the schema version");
    *version = std::stoi(*v);
    if (*version > kSchemaVersion)
        return make_error("journal", "journal.newer",
                          "cannot open " + path + ": it was written by a newer kiln (journal schema " +
                              std::to_string(*version) + ", this kiln knows up to " + std::to_string(kSchemaVersion) +
                              "); upgrade kiln or use another --journal");
    return ok_status();
}

Result<std::unique_ptr<Store>> open(const std::string& path, const SqliteOptions& options) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (options.read_only) {
        // Check first: SQLite must not get the chance to create anything.
        if (!fs::exists(path, ec))
            return make_error("journal", "journal.missing", "cannot open " + path + ": no journal there yet");
    } else {
        auto parent = fs::path(path).parent_path();
        if (!parent.empty()) fs::create_directories(parent, ec);
        if (ec)
            return make_error("journal", "journal.open", "cannot create the folder of " + path + ": " + ec.message());
    }

    // NOMUTEX: the store's own mutex serializes the connection.
    const int flags =
        (options.read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOMUTEX;
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
    Db db(raw);
    if (rc != SQLITE_OK) return sqlite_error(db.get(), path, "journal.open", "open");
    sqlite3* h = db.get();
    sqlite3_busy_timeout(h, options.busy_timeout_ms);
    // READWRITE quietly falls back to read-only on a file we may not write.
    if (!options.read_only && sqlite3_db_readonly(h, "main") == 1)
        return make_error("journal", "journal.open", "cannot open " + path + " for writing: permission denied");

    int version = 0;
    if (auto s = check_version(h, path, &version); !s) return s.error();

    if (options.read_only) {
        if (version < kOldestReadable)
            return make_error("journal", "journal.missing", "cannot open " + path + ": it is not a kiln journal yet");
    } else {
        // WAL: a commit is durable once written to the log, so kill -9 at any
        // point keeps every committed row and drops only the open transaction.
        // NORMAL skips the fsync per commit; only power loss could cost the
        // last few commits, never consistency.
        if (version == 0 && !exec(h, ("PRAGMA page_size=" + std::to_string(kPageSize)).c_str()))
            return sqlite_error(h, path, "journal.open", "set the page size");
        auto mode = pragma(h, "PRAGMA journal_mode=WAL");
        if (!mode) return sqlite_error(h, path, "journal.open", "switch to WAL mode");
        if (*mode != "wal")
            return make_error(
                "journal", "journal.open",
                "cannot open " + path + ": the file system does not support WAL (journal mode " + *mode + ")");
        sqlite3_wal_autocheckpoint(h, kCheckpointFrames);
        if (!exec(h, "PRAGMA synchronous=NORMAL") || !exec(h, "PRAGMA foreign_keys=ON"))
            return sqlite_error(h, path, "journal.open", "configure");
        // One transaction: a second process creating the schema at the same
        // time waits here, and a kill leaves either nothing or all of it.
        if (!exec(h, "BEGIN IMMEDIATE")) return sqlite_error(h, path, "journal.open", "lock");
        Status s = check_version(h, path, &version);  // again, now that we hold the lock
        if (s && !exec(h, kSchema)) s = sqlite_error(h, path, "journal.schema", "create the schema");
        if (s && version < kSchemaVersion &&
            !exec(h, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str()))
            s = sqlite_error(h, path, "journal.schema", "set the schema version");
        if (s && !exec(h, "COMMIT")) s = sqlite_error(h, path, "journal.schema", "commit the schema");
        if (!s) {
            exec(h, "ROLLBACK");
            return s.error();
        }
    }

    auto store = std::make_unique<SqliteStore>(std::move(db), path, options.read_only);
    store->set_has_records(version >= 2 || !options.read_only);
    if (auto s = store->prepare_all(); !s) return s.error();
    return std::unique_ptr<Store>(std::move(store));
}

}  // namespace

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path, const SqliteOptions& options) {
    try {
        return open(path, options);
    } catch (const std::exception& e) {
        return make_error("journal", "journal.open", "cannot open " + path + ": " + e.what());
    }
}

}  // namespace kiln::journal
