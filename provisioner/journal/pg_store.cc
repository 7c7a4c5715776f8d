#include "provisioner/journal/pg_store.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "provisioner/journal/leases.h"

namespace kiln::journal {

namespace {

// Advisory lock keys (two int4 keys: 'kiln' and a purpose), so kiln's locks
// never collide with an application sharing the database.
constexpr int kLockSpace = 0x6b696c6e;  // "kiln"
constexpr int kMigrateLock = 1;
constexpr int kRunLock = 2;

// Versioned migrations, applied in order inside one transaction under the
// migrate lock; kiln_schema holds one row per applied version. A database
// holding a version past the last one here was written by a newer kiln.
// The tables mirror the SQLite journal's (sqlite_store.cc), with BIGINT
// milliseconds and BIGSERIAL ids.
struct Migration {
    int version;
    const char* sql;
};
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE runs(
  id BIGSERIAL PRIMARY KEY, command TEXT NOT NULL, fleet_path TEXT NOT NULL, fleet_sha256 TEXT NOT NULL,
  kiln_version TEXT NOT NULL, status TEXT NOT NULL, started_ms BIGINT NOT NULL, ended_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE stage_results(
  id BIGSERIAL PRIMARY KEY, run_id BIGINT NOT NULL REFERENCES runs(id), node TEXT NOT NULL, stage TEXT NOT NULL,
  input_hash TEXT NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL, attempts INTEGER NOT NULL,
  actions INTEGER NOT NULL, started_ms BIGINT NOT NULL, ended_ms BIGINT NOT NULL);
CREATE INDEX stage_results_node ON stage_results(node);
CREATE TABLE verified(
  node TEXT NOT NULL, stage TEXT NOT NULL, input_hash TEXT NOT NULL, run_id BIGINT NOT NULL REFERENCES runs(id),
  verified_ms BIGINT NOT NULL, PRIMARY KEY(node, stage));
CREATE TABLE actions(
  id BIGSERIAL PRIMARY KEY, run_id BIGINT NOT NULL REFERENCES runs(id), node TEXT NOT NULL, stage TEXT NOT NULL,
  action_id TEXT NOT NULL, description TEXT NOT NULL, started_ms BIGINT NOT NULL,
  ended_ms BIGINT NOT NULL DEFAULT 0, outcome TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '');
CREATE INDEX actions_node ON actions(node);
CREATE TABLE events(
  id BIGSERIAL PRIMARY KEY, run_id BIGINT NOT NULL, ts_ms BIGINT NOT NULL, node TEXT NOT NULL, stage TEXT NOT NULL,
  kind TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX events_node ON events(node);
CREATE TABLE node_state(
  node TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL, stage TEXT NOT NULL, error TEXT NOT NULL,
  updated_ms BIGINT NOT NULL, run_id BIGINT NOT NULL);
)sql"},
    // Workers (leases.h): one row per node ever claimed. worker is '' once
    // released; generation only grows, so a superseded holder is fenced.
    {2, R"sql(
CREATE TABLE leases(
  node TEXT PRIMARY KEY, stage TEXT NOT NULL, worker TEXT NOT NULL, generation BIGINT NOT NULL,
  lease_until_ms BIGINT NOT NULL, claimed_ms BIGINT NOT NULL);
CREATE INDEX leases_worker ON leases(worker);
CREATE TABLE slots(
  key TEXT NOT NULL, slot INTEGER NOT NULL, worker TEXT NOT NULL DEFAULT '', node TEXT NOT NULL DEFAULT '',
  lease_until_ms BIGINT NOT NULL DEFAULT 0, PRIMARY KEY(key, slot));
CREATE INDEX slots_worker ON slots(worker);
)sql"},
};

// The server's clock in milliseconds: leases never depend on workers'
// clocks agreeing.
#define KILN_PG_NOW "(extract(epoch from clock_timestamp()) * 1000)::bigint"
constexpr int kSchemaVersion = kMigrations[std::size(kMigrations) - 1].version;

// Newest first; as the SQLite journal orders it (sqlite_store.cc kHistory).
constexpr const char* kHistory = R"sql(
SELECT ts, run_id, kind, stage, name, text, outcome, error FROM (
  SELECT CASE WHEN ended_ms <> 0 THEN ended_ms ELSE started_ms END AS ts, run_id, 'stage'::text AS kind, stage,
         outcome AS name, input_hash AS text, outcome, error, 2 AS kind_order, id
    FROM stage_results WHERE node = $1
  UNION ALL
  SELECT started_ms, run_id, 'action', stage, action_id, description, outcome, error, 1, id
    FROM actions WHERE node = $1
  UNION ALL
  SELECT ts_ms, run_id, 'event', stage, kind, message, '', '', 0, id
    FROM events WHERE node = $1) h
ORDER BY ts DESC, kind_order DESC, id DESC LIMIT $2::bigint
)sql";

// libpq's messages end in newlines and may span lines: one line for users.
std::string one_line(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    for (size_t i = 0; (i = s.find('\n', i)) != std::string::npos;) s.replace(i, 1, "; ");
    return s;
}

// A statement's parameters, as text (NULL where absent).
class Params {
public:
    Params& add(const std::string& v) {
        values_.push_back(v);
        null_.push_back(false);
        return *this;
    }
    Params& add(int64_t v) { return add(std::to_string(v)); }
    Params& add(int v) { return add(static_cast<int64_t>(v)); }
    Params& null() {
        values_.emplace_back();
        null_.push_back(true);
        return *this;
    }
    std::vector<const char*> pointers() const {
        std::vector<const char*> p;
        for (size_t i = 0; i < values_.size(); ++i) p.push_back(null_[i] ? nullptr : values_[i].c_str());
        return p;
    }
    int size() const { return static_cast<int>(values_.size()); }

private:
    std::vector<std::string> values_;
    std::vector<bool> null_;
};

// Owns a PGresult.
class Rows {
public:
    explicit Rows(PGresult* r = nullptr) : r_(r) {}
    Rows(Rows&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
    Rows& operator=(Rows&& o) noexcept {
        std::swap(r_, o.r_);
        return *this;
    }
    Rows(const Rows&) = delete;
    Rows& operator=(const Rows&) = delete;
    ~Rows() {
        if (r_) PQclear(r_);
    }
    int count() const { return PQntuples(r_); }
    std::string text(int row, int col) const {
        return std::string(PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col)));
    }
    int64_t integer(int row, int col) const { return PQgetisnull(r_, row, col) ? 0 : std::stoll(text(row, col)); }
    PGresult* get() const { return r_; }
    int64_t affected() const {
        const char* n = PQcmdTuples(r_);
        return (n && *n) ? std::stoll(n) : 0;
    }

private:
    PGresult* r_;
};

void quiet(void*, const char*) {}  // NOTICEs ("already exists, skipping") are not for users

// One connection, with the password passed beside the URL (never in it).
// Reconnects once when the server dropped the connection (a restart).
class Connection {
public:
    Connection(std::string url, PgOptions options) : url_(std::move(url)), options_(std::move(options)) {}
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() {
        if (conn_) PQfinish(conn_);
    }

    const std::string& url() const { return url_; }

    Status connect() {
        if (conn_) {
            PQfinish(conn_);
            conn_ = nullptr;
        }
        std::string password;
        if (options_.password) {
            auto p = options_.password->resolve();
            if (!p) return make_error("journal", "journal.password", "cannot connect to " + url_ + ": " + p.error().message);
            password = std::move(*p);
        }
        const std::string timeout = std::to_string(options_.connect_timeout_s);
        std::vector<const char*> keys = {"dbname", "connect_timeout", "application_name"};
        std::vector<const char*> values = {url_.c_str(), timeout.c_str(), "kiln"};
        if (options_.password) {
            keys.push_back("password");
            values.push_back(password.c_str());
        }
        keys.push_back(nullptr);
        values.push_back(nullptr);
        conn_ = PQconnectdbParams(keys.data(), values.data(), 1);
        // Overwrite our copy; libpq keeps its own for reconnects.
        for (auto& c : password) c = '\0';
        if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
            std::string why = conn_ ? one_line(PQerrorMessage(conn_)) : "out of memory";
            return make_error("journal", "journal.unavailable", "cannot connect to " + url_ + ": " + why, true);
        }
        PQsetNoticeProcessor(conn_, quiet, nullptr);
        // A process stalled inside a transaction (SIGSTOP) must not keep
        // row locks that a worker taking over its leases waits behind.
        std::string setup = "SET statement_timeout = " + std::to_string(options_.statement_timeout_ms) +
                            "; SET idle_in_transaction_session_timeout = " +
                            std::to_string(options_.statement_timeout_ms) + "; SET client_min_messages = warning";
        if (options_.read_only) setup += "; SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY";
        Rows r(PQexec(conn_, setup.c_str()));
        if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
            return make_error("journal", "journal.open", "cannot configure the session on " + url_ + ": " +
                                                             one_line(PQerrorMessage(conn_)));
        return ok_status();
    }

    // Runs one statement. Errors name what was attempted and the URL; a
    // lost connection, lock wait or serialization failure is transient.
    Result<Rows> exec(const std::string& what, const char* sql, const Params& params = {}) {
        if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
            if (in_transaction_)
                return make_error("journal", "journal.unavailable",
                                  "cannot " + what + " in " + url_ + ": the connection was lost", true);
            if (auto s = connect(); !s) return s.error();
        }
        // Without parameters, the simple protocol: it takes several
        // statements at once (the migrations).
        auto ptrs = params.pointers();
        Rows r(params.size() == 0 ? PQexec(conn_, sql)
                                  : PQexecParams(conn_, sql, params.size(), nullptr, ptrs.data(), nullptr, nullptr, 0));
        const auto st = PQresultStatus(r.get());
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
        return error_of(r, what);
    }

    Error error_of(const Rows& r, const std::string& what) const {
        const PGresult* res = r.get();
        const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
        const char* primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
        const std::string sqlstate = state ? state : "";
        const std::string msg = primary ? primary : one_line(PQerrorMessage(conn_));
        std::string code = "journal.write";
        bool transient = false;
        if (sqlstate == "23503") code = "journal.unknown_run";
        if (sqlstate == "25006") code = "journal.read_only";
        if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03" || sqlstate == "57014") {
            code = "journal.busy";
            transient = true;
        }
        if (sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0 || PQstatus(conn_) != CONNECTION_OK) {
            code = "journal.unavailable";
            transient = true;
        }
        return make_error("journal", code, "cannot " + what + " in " + url_ + ": " + msg, transient);
    }

    // Runs `body` in one transaction; rolls back when it fails.
    template <class F>
    Status transaction(const std::string& what, F&& body) {
        if (auto b = exec(what, "BEGIN"); !b) return b.error();
        in_transaction_ = true;
        Status s = body();
        if (s) {
            auto c = exec(what, "COMMIT");
            if (!c) s = c.error();
        }
        if (!s && PQstatus(conn_) == CONNECTION_OK) Rows(PQexec(conn_, "ROLLBACK"));
        in_transaction_ = false;
        return s;
    }

private:
    std::string url_;
    PgOptions options_;
    PGconn* conn_ = nullptr;
    bool in_transaction_ = false;
};

std::string default_worker_id() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    std::random_device rd;
    char nonce[9];
    std::snprintf(nonce, sizeof nonce, "%08x", rd());
    return std::string(host[0] ? host : "host") + ":" + std::to_string(getpid()) + ":" + nonce;
}

class PgStore : public Store, public Leases {
public:
    PgStore(std::unique_ptr<Connection> conn, bool read_only)
        : db_(std::move(conn)), read_only_(read_only), worker_(default_worker_id()) {}

    Leases* leases() override { return read_only_ ? nullptr : this; }

    Result<int64_t> begin_run(const RunInfo& info) override {
        return write<int64_t>("start a run", [&]() -> Result<int64_t> {
            auto r = db_->exec("start a run",
                               "INSERT INTO runs(command, fleet_path, fleet_sha256, kiln_version, status, started_ms) "
                               "VALUES($1,$2,$3,$4,'running',$5) RETURNING id",
                               Params().add(info.command).add(info.fleet_path).add(info.fleet_sha256)
                                   .add(info.kiln_version).add(now_ms()));
            if (!r) return r.error();
            return r->integer(0, 0);
        });
    }

    Status end_run(int64_t run_id, const std::string& status) override {
        return write<void>("end a run", [&]() -> Status {
            auto r = db_->exec("end run " + std::to_string(run_id), "UPDATE runs SET status=$1, ended_ms=$2 WHERE id=$3",
                               Params().add(status).add(now_ms()).add(run_id));
            if (!r) return r.error();
            if (r->affected() == 0)
                return make_error("journal", "journal.unknown_run",
                                  "cannot end run " + std::to_string(run_id) + " in " + db_->url() + ": no such run");
            return ok_status();
        });
    }

    Result<std::vector<RunSummary>> runs(int limit) override {
        using R = std::vector<RunSummary>;
        return read<R>([&]() -> Result<R> {
            Params p;
            if (limit > 0) p.add(limit); else p.null();
            auto r = db_->exec("list runs",
                               "SELECT id, command, status, started_ms, ended_ms FROM runs ORDER BY id DESC "
                               "LIMIT $1::bigint",
                               p);
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->integer(i, 0), r->text(i, 1), r->text(i, 2), r->integer(i, 3), r->integer(i, 4)});
            return out;
        });
    }

    Result<std::optional<std::string>> last_verified_hash(const std::string& node, const std::string& stage) override {
        using R = std::optional<std::string>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the verified hash of " + node + "/" + stage,
                               "SELECT input_hash FROM verified WHERE node=$1 AND stage=$2",
                               Params().add(node).add(stage));
            if (!r) return r.error();
            if (r->count() == 0) return R();
            return R(r->text(0, 0));
        });
    }

    Status record_stage(const StageRecord& rec) override {
        // One transaction: the result row and the verified hash land together.
        return write<void>("record a stage", [&]() -> Status {
            const std::string what = "record stage " + rec.node + "/" + rec.stage;
            return db_->transaction(what, [&]() -> Status {
                if (auto f = fence(rec.node); !f) return f;
                auto r = db_->exec(what,
                                   "INSERT INTO stage_results(run_id, node, stage, input_hash, outcome, error, "
                                   "attempts, actions, started_ms, ended_ms) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
                                   Params().add(rec.run_id).add(rec.node).add(rec.stage).add(rec.input_hash)
                                       .add(rec.outcome).add(rec.error).add(rec.attempts).add(rec.actions)
                                       .add(rec.started_ms).add(rec.ended_ms));
                if (!r) return r.error();
                if (rec.outcome != "verified" && rec.outcome != "skipped") return ok_status();
                auto v = db_->exec(what,
                                   "INSERT INTO verified(node, stage, input_hash, run_id, verified_ms) "
                                   "VALUES($1,$2,$3,$4,$5) ON CONFLICT(node, stage) DO UPDATE SET "
                                   "input_hash=excluded.input_hash, run_id=excluded.run_id, "
                                   "verified_ms=excluded.verified_ms",
                                   Params().add(rec.node).add(rec.stage).add(rec.input_hash).add(rec.run_id)
                                       .add(rec.ended_ms ? rec.ended_ms : now_ms()));
                if (!v) return v.error();
                return ok_status();
            });
        });
    }

    Status forget_verified(const std::string& node, const std::string& stage) override {
        return write<void>("forget verified hashes", [&]() -> Status {
            const std::string what = "forget verified hashes of " + node;
            auto r = stage.empty() ? db_->exec(what, "DELETE FROM verified WHERE node=$1", Params().add(node))
                                   : db_->exec(what, "DELETE FROM verified WHERE node=$1 AND stage=$2",
                                               Params().add(node).add(stage));
            if (!r) return r.error();
            return ok_status();
        });
    }

    Result<int64_t> begin_action(int64_t run_id, const std::string& node, const std::string& stage,
                                 const std::string& action_id, const std::string& description) override {
        // The gate before every side effect: under a lease, the row is
        // written only while the lease's generation is still ours.
        return write<int64_t>("record an action", [&]() -> Result<int64_t> {
            const std::string what = "record action " + action_id + " of " + node;
            int64_t id = 0;
            auto s = fenced(node, what, [&]() -> Status {
                auto r = db_->exec(what,
                                   "INSERT INTO actions(run_id, node, stage, action_id, description, started_ms) "
                                   "VALUES($1,$2,$3,$4,$5,$6) RETURNING id",
                                   Params().add(run_id).add(node).add(stage).add(action_id).add(description)
                                       .add(now_ms()));
                if (!r) return r.error();
                id = r->integer(0, 0);
                return ok_status();
            });
            if (!s) return s.error();
            return id;
        });
    }

    Status end_action(int64_t row, const std::string& outcome, const std::string& error) override {
        return write<void>("end an action", [&]() -> Status {
            const std::string what = "end action row " + std::to_string(row);
            auto end = [&]() -> Status {
                auto r = db_->exec(what, "UPDATE actions SET ended_ms=$1, outcome=$2, error=$3 WHERE id=$4 "
                                         "RETURNING node",
                                   Params().add(now_ms()).add(outcome).add(error).add(row));
                if (!r) return r.error();
                if (r->count() == 0)
                    return make_error("journal", "journal.unknown_action",
                                      "cannot " + what + " in " + db_->url() + ": no such row");
                return fence(r->text(0, 0));  // rolls the end back when the lease is gone
            };
            if (held_.empty()) return end();
            return db_->transaction(what, end);
        });
    }

    Status record_event(const EventRecord& e) override {
        return write<void>("record an event", [&]() -> Status {
            return fenced(e.node, "record event " + e.kind, [&]() -> Status {
                auto r = db_->exec("record event " + e.kind,
                                   "INSERT INTO events(run_id, ts_ms, node, stage, kind, message) "
                                   "VALUES($1,$2,$3,$4,$5,$6)",
                                   Params().add(e.run_id).add(e.ts_ms ? e.ts_ms : now_ms()).add(e.node).add(e.stage)
                                       .add(e.kind).add(e.message));
                if (!r) return r.error();
                return ok_status();
            });
        });
    }

    Status set_node_state(const NodeState& s) override {
        return write<void>("set a node state", [&]() -> Status {
            return fenced(s.node, "set the state of " + s.node, [&]() -> Status {
                auto r = db_->exec("set the state of " + s.node,
                                   "INSERT INTO node_state(node, state, detail, stage, error, updated_ms, run_id) "
                                   "VALUES($1,$2,$3,$4,$5,$6,$7) ON CONFLICT(node) DO UPDATE SET state=excluded.state, "
                                   "detail=excluded.detail, stage=excluded.stage, error=excluded.error, "
                                   "updated_ms=excluded.updated_ms, run_id=excluded.run_id",
                                   Params().add(s.node).add(s.state).add(s.detail).add(s.stage).add(s.error)
                                       .add(s.updated_ms ? s.updated_ms : now_ms()).add(s.run_id));
                if (!r) return r.error();
                return ok_status();
            });
        });
    }

    Result<std::vector<NodeState>> node_states() override {
        using R = std::vector<NodeState>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read node states",
                               "SELECT node, state, detail, stage, error, updated_ms, run_id FROM node_state "
                               "ORDER BY node COLLATE \"C\"");
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->text(i, 0), r->text(i, 1), r->text(i, 2), r->text(i, 3), r->text(i, 4),
                               r->integer(i, 5), r->integer(i, 6)});
            return out;
        });
    }

    Result<std::vector<HistoryEntry>> history(const std::string& node, int limit) override {
        using R = std::vector<HistoryEntry>;
        return read<R>([&]() -> Result<R> {
            Params p;
            p.add(node);
            if (limit > 0) p.add(limit); else p.null();
            auto r = db_->exec("read the history of " + node, kHistory, p);
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->integer(i, 0), r->integer(i, 1), r->text(i, 2), r->text(i, 3), r->text(i, 4),
                               r->text(i, 5), r->text(i, 6), r->text(i, 7)});
            return out;
        });
    }

    Result<std::vector<StageRecord>> stage_records(const std::string& node) override {
        using R = std::vector<StageRecord>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the stage results of " + node,
                               "SELECT run_id, node, stage, input_hash, outcome, error, attempts, actions, started_ms, "
                               "ended_ms FROM stage_results WHERE node=$1 ORDER BY started_ms, id",
                               Params().add(node));
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->integer(i, 0), r->text(i, 1), r->text(i, 2), r->text(i, 3), r->text(i, 4),
                               r->text(i, 5), static_cast<int>(r->integer(i, 6)), static_cast<int>(r->integer(i, 7)),
                               r->integer(i, 8), r->integer(i, 9)});
            return out;
        });
    }


    // ---- Leases -----------------------------------------------------------

    void set_worker_id(const std::string& worker) override {
        std::lock_guard<std::mutex> lock(mu_);
        worker_ = worker;
    }
    const std::string& worker_id() const override { return worker_; }

    Result<std::variant<Lease, LeaseHolder>> claim(const std::string& node, const std::string& stage,
                                                   std::chrono::milliseconds ttl) override {
        using R = std::variant<Lease, LeaseHolder>;
        return write<R>("claim a node", [&]() -> Result<R> {
            const std::string what = "claim " + node + "/" + stage;
            const int64_t ttl_ms = ttl.count();
            const auto asked = std::chrono::steady_clock::now();
            R out = LeaseHolder{};
            auto s = db_->transaction(what, [&]() -> Status {
                auto ins = db_->exec(what,
                                     "INSERT INTO leases(node, stage, worker, generation, lease_until_ms, claimed_ms) "
                                     "VALUES($1, $2, $3, 1, " KILN_PG_NOW " + $4::bigint, " KILN_PG_NOW ") "
                                     "ON CONFLICT(node) DO NOTHING RETURNING generation",
                                     Params().add(node).add(stage).add(worker_).add(ttl_ms));
                if (!ins) return ins.error();
                std::string previous, previous_stage;
                int64_t previous_generation = 0;
                if (ins->count() == 0) {
                    // Row locked by another claimer right now: not waited on.
                    auto row = db_->exec(what,
                                         "SELECT worker, generation, lease_until_ms, lease_until_ms < " KILN_PG_NOW
                                         ", stage FROM leases WHERE node=$1 FOR UPDATE SKIP LOCKED",
                                         Params().add(node));
                    if (!row) return row.error();
                    if (row->count() == 0) {
                        out = LeaseHolder{"(claiming)", 0, 0};
                        return ok_status();
                    }
                    previous = row->text(0, 0);
                    previous_generation = row->integer(0, 1);
                    const bool expired = row->text(0, 3) == "t";
                    previous_stage = row->text(0, 4);
                    if (!previous.empty() && previous != worker_ && !expired) {
                        out = LeaseHolder{previous, previous_generation, row->integer(0, 2)};
                        return ok_status();
                    }
                    auto up = db_->exec(what,
                                        "UPDATE leases SET stage=$2, worker=$3, generation=generation+1, "
                                        "lease_until_ms=" KILN_PG_NOW " + $4::bigint, claimed_ms=" KILN_PG_NOW
                                        " WHERE node=$1 RETURNING generation",
                                        Params().add(node).add(stage).add(worker_).add(ttl_ms));
                    if (!up) return up.error();
                    out = Lease{node, stage, worker_, up->integer(0, 0)};
                } else {
                    out = Lease{node, stage, worker_, ins->integer(0, 0)};
                }
                const auto& lease = std::get<Lease>(out);
                // Asking again for the stage it holds (waiting on a slot)
                // is not news for the journal.
                if (previous == worker_ && previous_stage == stage) return ok_status();
                std::string message = "worker " + worker_ + " claimed stage " + stage + " (generation " +
                                      std::to_string(lease.generation) + ")";
                if (!previous.empty() && previous != worker_) {
                    // Its holder died or stalled: what it started and never
                    // ended is closed here; the stage observes what really
                    // happened before planning anything.
                    auto orphans = db_->exec(what,
                                             "UPDATE actions SET ended_ms=$2, outcome='interrupted', error=$3 "
                                             "WHERE node=$1 AND ended_ms=0 RETURNING action_id",
                                             Params().add(node).add(now_ms())
                                                 .add("worker " + previous + " lost its lease (generation " +
                                                      std::to_string(previous_generation) +
                                                      ") before ending this action; re-observed"));
                    if (!orphans) return orphans.error();
                    message += ", taking over from " + previous + " (generation " +
                               std::to_string(previous_generation) + ", expired)";
                    if (orphans->count() > 0)
                        message += "; " + std::to_string(orphans->count()) + " unfinished action(s) re-observed";
                }
                auto ev = db_->exec(what,
                                    "INSERT INTO events(run_id, ts_ms, node, stage, kind, message) "
                                    "VALUES(0, $1, $2, $3, 'lease', $4)",
                                    Params().add(now_ms()).add(node).add(stage).add(message));
                if (!ev) return ev.error();
                return ok_status();
            });
            if (!s) return s.error();
            if (auto* lease = std::get_if<Lease>(&out)) {
                held_[node] = *lease;
                fresh_[node] = {asked, ttl};
            }
            return out;
        });
    }

    Result<std::vector<std::string>> renew(std::chrono::milliseconds ttl) override {
        using R = std::vector<std::string>;
        return write<R>("renew leases", [&]() -> Result<R> {
            R lost;
            if (held_.empty()) return lost;
            const auto asked = std::chrono::steady_clock::now();
            auto slots = db_->exec("renew the slots of " + worker_,
                                   "UPDATE slots SET lease_until_ms=" KILN_PG_NOW " + $2::bigint WHERE worker=$1",
                                   Params().add(worker_).add(static_cast<int64_t>(ttl.count())));
            if (!slots) return slots.error();
            auto r = db_->exec("renew the leases of " + worker_,
                               "UPDATE leases SET lease_until_ms=" KILN_PG_NOW " + $2::bigint WHERE worker=$1 "
                               "RETURNING node, generation",
                               Params().add(worker_).add(static_cast<int64_t>(ttl.count())));
            if (!r) return r.error();
            std::map<std::string, int64_t> kept;
            for (int i = 0; i < r->count(); ++i) kept[r->text(i, 0)] = r->integer(i, 1);
            for (const auto& [node, lease] : held_) {
                auto k = kept.find(node);
                if (k == kept.end() || k->second != lease.generation)
                    lost.push_back(node);
                else
                    fresh_[node] = {asked, ttl};
            }
            return lost;
        });
    }

    Status release(const std::string& node) override {
        return write<void>("release a lease", [&]() -> Status {
            auto it = held_.find(node);
            if (it == held_.end()) return ok_status();
            const int64_t generation = it->second.generation;
            held_.erase(it);
            fresh_.erase(node);
            auto r = db_->exec("release the lease of " + node,
                               "UPDATE leases SET worker='', lease_until_ms=0 WHERE node=$1 AND worker=$2 "
                               "AND generation=$3",
                               Params().add(node).add(worker_).add(generation));
            if (!r) return r.error();
            return ok_status();
        });
    }

    Result<std::optional<std::string>> take_slots(const std::string& node,
                                                  std::vector<std::pair<std::string, int>> limits,
                                                  std::chrono::milliseconds ttl) override {
        using R = std::optional<std::string>;
        // One order for every worker: concurrent first inserts of the same
        // keys cannot deadlock.
        std::sort(limits.begin(), limits.end());
        return write<R>("take slots", [&]() -> Result<R> {
            const std::string what = "take fleet-wide slots for " + node;
            R full;
            auto s = db_->transaction(what, [&]() -> Status {
                for (const auto& [key, capacity] : limits) {
                    auto made = db_->exec(what,
                                          "INSERT INTO slots(key, slot) SELECT $1, g "
                                          "FROM generate_series(0, $2::int - 1) g ON CONFLICT DO NOTHING",
                                          Params().add(key).add(capacity));
                    if (!made) return made.error();
                    auto free = db_->exec(what,
                                          "SELECT slot FROM slots WHERE key=$1 AND slot < $2::int AND (worker='' OR "
                                          "lease_until_ms < " KILN_PG_NOW " OR (worker=$3 AND node=$4)) "
                                          "ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED",
                                          Params().add(key).add(capacity).add(worker_).add(node));
                    if (!free) return free.error();
                    if (free->count() == 0) {
                        full = key;
                        // Undo the slots taken so far: all or none.
                        return make_error("journal", "slots.full", key);
                    }
                    auto took = db_->exec(what,
                                          "UPDATE slots SET worker=$3, node=$4, lease_until_ms=" KILN_PG_NOW
                                          " + $5::bigint WHERE key=$1 AND slot=$2::int",
                                          Params().add(key).add(free->integer(0, 0)).add(worker_).add(node)
                                              .add(static_cast<int64_t>(ttl.count())));
                    if (!took) return took.error();
                }
                return ok_status();
            });
            if (!s && !full) return s.error();
            return full;
        });
    }

    Status release_slots(const std::string& node) override {
        return write<void>("release slots", [&]() -> Status {
            auto r = db_->exec("release the slots of " + node,
                               "UPDATE slots SET worker='', node='', lease_until_ms=0 WHERE worker=$1 AND node=$2",
                               Params().add(worker_).add(node));
            if (!r) return r.error();
            return ok_status();
        });
    }

    void forget(const std::string& node) override {
        std::lock_guard<std::mutex> lock(mu_);
        held_.erase(node);
        fresh_.erase(node);
    }

    Status check_fresh(const std::string& node) override {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = fresh_.find(node);
        if (it == fresh_.end() || !held_.count(node))
            return make_error("journal", "lease.stale", "no lease held on node " + node);
        const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                               it->second.first);
        if (age < it->second.second / 2) return ok_status();
        return make_error("journal", "lease.stale",
                          "lease on node " + node + " last confirmed " + std::to_string(age.count()) +
                              " ms ago (ttl " + std::to_string(it->second.second.count()) +
                              " ms); claiming it again before any side effect");
    }

    Result<std::vector<LeaseRow>> lease_rows() override {
        using R = std::vector<LeaseRow>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the leases",
                               "SELECT node, stage, worker, generation, lease_until_ms FROM leases "
                               "ORDER BY node COLLATE \"C\"");
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->text(i, 0), r->text(i, 1), r->text(i, 2), r->integer(i, 3), r->integer(i, 4)});
            return out;
        });
    }

private:
    // Inside a transaction: fails with "lease.lost" unless the node's lease
    // row still names this worker at the generation it claimed. FOR SHARE
    // holds off a takeover until this transaction ends.
    Status fence(const std::string& node) {
        auto it = held_.find(node);
        if (it == held_.end()) return ok_status();
        const Lease& lease = it->second;
        auto r = db_->exec("check the lease of " + node,
                           "SELECT worker, generation FROM leases WHERE node=$1 FOR SHARE", Params().add(node));
        if (!r) return r.error();
        if (r->count() == 1 && r->text(0, 0) == worker_ && r->integer(0, 1) == lease.generation) return ok_status();
        std::string by;
        if (r->count() == 1 && !r->text(0, 0).empty())
            by = " by generation " + std::to_string(r->integer(0, 1)) + " of worker " + r->text(0, 0);
        return make_error("journal", "lease.lost",
                          "lease lost on node " + node + " stage " + lease.stage + " (generation " +
                              std::to_string(lease.generation) + " superseded" + by + "); this worker stops there");
    }

    // A write about `node`: fenced in one transaction while a lease on it
    // is held, as it always was otherwise.
    template <class F>
    Status fenced(const std::string& node, const std::string& what, F&& body) {
        if (node.empty() || !held_.count(node)) return body();
        return db_->transaction(what, [&]() -> Status {
            if (auto f = fence(node); !f) return f;
            return body();
        });
    }

public:
private:
    // One connection, one statement at a time: the engine's threads queue
    // here, as they share the SQLite connection.
    template <class T, class F>
    Result<T> read(F&& body) {
        try {
            std::lock_guard<std::mutex> lock(mu_);
            return body();
        } catch (const std::exception& e) {
            return make_error("journal", "journal.internal", "cannot read " + db_->url() + ": " + e.what());
        }
    }

    template <class T, class F>
    Result<T> write(const char* what, F&& body) {
        if (read_only_)
            return make_error("journal", "journal.read_only",
                              std::string("cannot ") + what + " in " + db_->url() + ": the journal was opened read-only");
        return read<T>(std::forward<F>(body));
    }

    std::mutex mu_;
    std::unique_ptr<Connection> db_;
    bool read_only_;
    std::string worker_;
    std::map<std::string, Lease> held_;  // node -> the lease this process holds (guarded by mu_)
    // node -> when the server last confirmed it (sent time of the claim or
    // renewal, monotonic) and its ttl
    std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::chrono::milliseconds>> fresh_;
};

// The schema version the database holds: 0 when kiln never wrote it.
Result<int> schema_version(Connection& db) {
    // A catalog query, not to_regclass(): it reads with this statement's
    // snapshot, so an opener that waited on the migrate lock sees the
    // table the one before it committed.
    auto t = db.exec("read the schema version",
                     "SELECT EXISTS(SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
                     "AND tablename = 'kiln_schema')");
    if (!t) return t.error();
    if (t->text(0, 0) != "t") return 0;
    auto v = db.exec("read the schema version", "SELECT coalesce(max(version), 0) FROM kiln_schema");
    if (!v) return v.error();
    return static_cast<int>(v->integer(0, 0));
}

Status refuse_newer(const std::string& url, int version) {
    return make_error("journal", "journal.newer",
                      "cannot open " + url + ": it was written by a newer kiln (journal schema " +
                          std::to_string(version) + ", this kiln knows up to " + std::to_string(kSchemaVersion) +
                          "); upgrade kiln or use another --store");
}

Status migrate(Connection& db) {
    return db.transaction("migrate the schema", [&]() -> Status {
        const std::string lock = "SELECT pg_advisory_xact_lock(" + std::to_string(kLockSpace) + ", " +
                                 std::to_string(kMigrateLock) + ")";
        if (auto l = db.exec("lock the schema", lock.c_str()); !l) return l.error();
        auto version = schema_version(db);  // again, now that we hold the lock
        if (!version) return version.error();
        if (*version > kSchemaVersion) return refuse_newer(db.url(), *version);
        if (*version == 0) {
            if (auto c = db.exec("create the schema", "CREATE TABLE kiln_schema(version INTEGER PRIMARY KEY, "
                                                      "applied_ms BIGINT NOT NULL)");
                !c)
                return c.error();
        }
        for (const auto& m : kMigrations) {
            if (m.version <= *version) continue;
            const std::string what = "apply schema migration " + std::to_string(m.version);
            if (auto r = db.exec(what, m.sql); !r) return r.error();
            if (auto r = db.exec(what, "INSERT INTO kiln_schema(version, applied_ms) VALUES($1, $2)",
                                 Params().add(m.version).add(now_ms()));
                !r)
                return r.error();
        }
        return ok_status();
    });
}

Result<std::unique_ptr<Store>> open(const std::string& url, const PgOptions& options) {
    if (auto s = check_store_url(url); !s) return s.error();
    auto db = std::make_unique<Connection>(url, options);
    if (auto s = db->connect(); !s) return s.error();
    auto version = schema_version(*db);
    if (!version) return version.error();
    if (*version > kSchemaVersion) return refuse_newer(url, *version).error();
    if (options.read_only) {
        if (*version < kSchemaVersion)
            return make_error("journal", "journal.missing",
                              "cannot open " + url + ": no kiln journal there yet (schema " +
                                  std::to_string(*version) + ")");
    } else if (*version < kSchemaVersion) {
        if (auto s = migrate(*db); !s) return s.error();
    }
    return std::unique_ptr<Store>(std::make_unique<PgStore>(std::move(db), options.read_only));
}

}  // namespace

Result<std::unique_ptr<Store>> open_pg_store(const std::string& url, const PgOptions& options) {
    try {
        return open(url, options);
    } catch (const std::exception& e) {
        return make_error("journal", "journal.open", "cannot open " + redact_store_url(url) + ": " + e.what());
    }
}

// ---- PgRunLock ----------------------------------------------------------

struct PgRunLock::Conn {
    Connection db;
    Conn(const std::string& url, const PgOptions& o) : db(url, o) {}
};

PgRunLock::PgRunLock(std::unique_ptr<Conn> conn) : conn_(std::move(conn)) {}
PgRunLock::PgRunLock(PgRunLock&& o) noexcept = default;
PgRunLock::~PgRunLock() = default;  // closing the session releases the lock

Result<PgRunLock> PgRunLock::acquire(const std::string& url, const PgOptions& options) {
    if (auto s = check_store_url(url); !s) return s.error();
    auto c = std::make_unique<Conn>(url, options);
    if (auto s = c->db.connect(); !s) return s.error();
    const std::string sql =
        "SELECT pg_try_advisory_lock(" + std::to_string(kLockSpace) + ", " + std::to_string(kRunLock) + ")";
    auto r = c->db.exec("take the run lock", sql.c_str());
    if (!r) return r.error();
    if (r->text(0, 0) != "t") {
        const std::string who =
            "SELECT coalesce(string_agg(a.pid::text || ' from ' || coalesce(host(a.client_addr), 'a local socket'), "
            "', '), '?') FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
            "AND l.classid = " + std::to_string(kLockSpace) + " AND l.objid = " + std::to_string(kRunLock) +
            " AND l.granted";
        auto holder = c->db.exec("find the run lock's holder", who.c_str());
        return make_error("journal", "journal.locked",
                          "another kiln run (server process " + (holder ? holder->text(0, 0) : std::string("?")) +
                              ") holds the run lock of " + url + "; wait for it or stop it");
    }
    return PgRunLock(std::move(c));
}

Result<bool> PgRunLock::held(const std::string& url, const PgOptions& options) {
    if (auto s = check_store_url(url); !s) return s.error();
    Connection db(url, options);
    if (auto s = db.connect(); !s) return s.error();
    const std::string sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = " +
                            std::to_string(kLockSpace) + " AND objid = " + std::to_string(kRunLock) + " AND granted";
    auto r = db.exec("look for a live run", sql.c_str());
    if (!r) return r.error();
    return r->integer(0, 0) > 0;
}

}  // namespace kiln::journal
