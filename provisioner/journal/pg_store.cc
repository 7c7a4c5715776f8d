#include "provisioner/journal/pg_store.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <thread>
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

// The slot key of max_unavailable (leases.h take_unavailable); no stage
// resource is named so ("kind:id").
constexpr const char* kUnavailable = "unavailable";
// Named locks (leases.h take_lock) live in the slots table under this
// prefix, apart from every limit's key.
constexpr const char* kLockPrefix = "lock:";

// The LISTEN/NOTIFY channel that wakes waiting workers (leases.h on_wake).
#define KILN_PG_CHANNEL "kiln_work"

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
    // Live workers (`kiln workers`): one row per worker run, kept by its
    // heartbeat; expires_ms passed means it is gone (a clean exit deletes it).
    {3, R"sql(
CREATE TABLE workers(
  worker TEXT PRIMARY KEY, host TEXT NOT NULL, pid BIGINT NOT NULL, labels TEXT NOT NULL,
  started_ms BIGINT NOT NULL, heartbeat_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL);
)sql"},
    // The lease generation each stage was verified under (0: without a
    // lease): a worker that found a node held at generation G counts what
    // was verified at G or later as done (Leases::verified_since).
    {4, R"sql(
ALTER TABLE IF EXISTS verified ADD COLUMN IF NOT EXISTS generation BIGINT NOT NULL DEFAULT 0;
)sql"},
    // The generation at which the node's holder took it (claims of its
    // later stages bump generation, not this): a worker that finds the node
    // held counts what the holder verified since it took the node as done,
    // its earlier stages too (Leases::verified_since, LeaseHolder).
    {5, R"sql(
ALTER TABLE leases ADD COLUMN held_from BIGINT NOT NULL DEFAULT 0;
UPDATE leases SET held_from = generation;
)sql"},
    // Records stages publish for later stages and the report (NodeRecord).
    {6, R"sql(
CREATE TABLE records(
  id BIGSERIAL PRIMARY KEY, run_id BIGINT NOT NULL, node TEXT NOT NULL, stage TEXT NOT NULL, kind TEXT NOT NULL,
  body_schema INTEGER NOT NULL, body TEXT NOT NULL, ts_ms BIGINT NOT NULL);
CREATE INDEX records_node_kind ON records(node, kind, id);
)sql"},
};

// After "WITH freed AS (UPDATE ... RETURNING 1)": wakes listening workers
// (Leases::on_wake) with `payload` when the update freed anything, in the
// release's own statement. A transaction that notifies holds a server-wide
// lock until it ends; releases commit unflushed, so that is not the length
// of a flush (which serialised every worker's commits when it was).
#define KILN_PG_WAKE(payload) \
    "SELECT pg_notify('" KILN_PG_CHANNEL "', " payload ") FROM (SELECT 1 FROM freed LIMIT 1) one"

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

// A PostgreSQL array literal of `items` ('{"a","b"}'), each quoted.
template <class Strings>
std::string text_array(const Strings& items) {
    std::string out = "{";
    for (const auto& item : items) {
        if (out.size() > 1) out += ',';
        out += '"';
        for (char c : item) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + "}";
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
    Params& append(const Params& more) {
        values_.insert(values_.end(), more.values_.begin(), more.values_.end());
        null_.insert(null_.end(), more.null_.begin(), more.null_.end());
        return *this;
    }

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

// How a transaction commits (Connection::transaction).
enum class Commit { Flushed, Unflushed };

// One connection, with the password passed beside the URL (never in it).
// When the server dropped it (a restart, a failover), the next operation
// connects again, retrying for up to PgOptions::reconnect_for.
class Connection {
public:
    Connection(std::string url, PgOptions options) : url_(std::move(url)), options_(std::move(options)) {}
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() {
        if (conn_) PQfinish(conn_);
    }

    const std::string& url() const { return url_; }
    PGconn* raw() const { return conn_; }

    Status connect() {
        if (conn_) {
            PQfinish(conn_);
            conn_ = nullptr;
        }
        std::string password;
        if (options_.password) {
            auto p = options_.password->resolve();
            if (!p)
                return make_error("journal", "journal.password",
                                  "cannot connect to " + url_ + ": " + p.error().message);
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
        // What the server flushes by default (its synchronous_commit, as
        // the operator set it): the commits kiln asks to be durable run at
        // that setting; every other commit of this session runs unflushed
        // (docs/store.md, "Which commits are flushed").
        {
            Rows sc(PQexec(conn_, "SHOW synchronous_commit"));
            server_flushes_ =
                !(PQresultStatus(sc.get()) == PGRES_TUPLES_OK && sc.count() == 1 && sc.text(0, 0) == "off");
        }
        // A process stalled inside a transaction (SIGSTOP) must not keep
        // row locks that a worker taking over its leases waits behind.
        std::string setup =
            "SET statement_timeout = " + std::to_string(options_.statement_timeout_ms) +
            "; SET idle_in_transaction_session_timeout = " + std::to_string(options_.statement_timeout_ms) +
            "; SET client_min_messages = warning";
        if (options_.read_only)
            setup += "; SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY";
        else {
            setup += "; SET synchronous_commit = off";
            session_unflushed_ = true;
        }
        Rows r(PQexec(conn_, setup.c_str()));
        if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
            return make_error("journal", "journal.open",
                              "cannot configure the session on " + url_ + ": " + one_line(PQerrorMessage(conn_)));
        return ok_status();
    }

    // Before each operation (one statement or one transaction): a
    // connection the server closed while this process was idle (a restart)
    // is noticed here, before anything is sent, and made again, retrying
    // with backoff for up to reconnect_for. Nothing was sent on the dead
    // connection, so nothing is in doubt.
    Status ready(const std::string& what) {
        lost_ = false;
        commit_unknown_ = false;
        if (conn_ && PQstatus(conn_) == CONNECTION_OK) {
            // Whatever arrived while idle (the server's FATAL before it
            // closed, then EOF) is read now; libpq marks a closed socket.
            for (int i = 0; i < 4 && readable(); ++i)
                if (!PQconsumeInput(conn_)) break;
            if (PQstatus(conn_) == CONNECTION_OK) return ok_status();
        }
        return reconnect(what);
    }

    // After a failed operation: whether the connection broke under it (the
    // operation may be tried again on a new one), and whether a statement
    // that could have committed went out and its answer was lost (then it
    // is not re-sent blindly: whether it committed is unknown).
    bool lost() const { return lost_ || !conn_ || PQstatus(conn_) != CONNECTION_OK; }
    int64_t statements() const { return statements_.load(); }
    int64_t commits_flushed() const { return commits_flushed_.load(); }
    int64_t commits_unflushed() const { return commits_unflushed_.load(); }
    bool commit_unknown() const { return commit_unknown_; }
    int64_t reconnects() const { return reconnects_.load(); }

    // Runs one statement. Errors name what was attempted and the URL; a
    // lost connection, lock wait or serialization failure is transient.
    Result<Rows> exec(const std::string& what, const char* sql, const Params& params = {}) {
        if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
            lost_ = true;
            if (in_transaction_)
                return make_error("journal", "journal.unavailable",
                                  "cannot " + what + " in " + url_ + ": the connection was lost", true);
            if (auto s = connect(); !s) return s.error();
        }
        // Without parameters, the simple protocol: it takes several
        // statements at once (the migrations, BEGIN with its SET LOCAL).
        ++statements_;
        auto ptrs = params.pointers();
        Rows r(params.size() == 0 ? PQexec(conn_, sql)
                                  : PQexecParams(conn_, sql, params.size(), nullptr, ptrs.data(), nullptr, nullptr, 0));
        const auto st = PQresultStatus(r.get());
        const std::string_view text(sql);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
            // A write outside a transaction commits by itself, at the
            // session's default: unflushed.
            if (!in_transaction_ && writes(text)) ++(session_flushes() ? commits_flushed_ : commits_unflushed_);
            return r;
        }
        Error e = error_of(r, what);
        if (e.code == "journal.unavailable") {
            lost_ = true;
            // A statement outside a transaction commits by itself, and so
            // does COMMIT: lost on the way back, its fate is unknown. Inside
            // a transaction nothing commits before COMMIT.
            if (text == "COMMIT" || (!in_transaction_ && text.rfind("BEGIN", 0) != 0)) commit_unknown_ = true;
        }
        return e;
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

    // Runs `body` in one transaction; rolls back when it fails. Flushed:
    // its commit waits for the server's default flush (synchronous_commit
    // as configured: a write that must be durable before a side effect);
    // Unflushed: at the session's default, which does not wait (a write
    // whose loss on a server crash is harmless). The SET LOCAL travels
    // with BEGIN: no round trip of its own.
    template <class F>
    Status transaction(const std::string& what, Commit commit, F&& body) {
        const bool flush = commit == Commit::Flushed && !options_.read_only;
        if (auto b = exec(what, flush ? "BEGIN; SET LOCAL synchronous_commit TO DEFAULT" : "BEGIN"); !b)
            return b.error();
        in_transaction_ = true;
        Status s = body();
        if (s) {
            auto c = exec(what, "COMMIT");
            if (!c)
                s = c.error();
            else
                ++((flush ? server_flushes_ : session_flushes()) ? commits_flushed_ : commits_unflushed_);
        }
        if (!s && PQstatus(conn_) == CONNECTION_OK) Rows(PQexec(conn_, "ROLLBACK"));
        in_transaction_ = false;
        return s;
    }

private:
    // Whether a statement sent on its own writes (and so commits).
    static bool writes(std::string_view sql) {
        for (std::string_view verb : {"INSERT", "UPDATE", "DELETE", "WITH"})
            if (sql.rfind(verb, 0) == 0) return true;
        return false;
    }
    // Writing sessions default to unflushed commits (connect()).
    bool session_flushes() const { return server_flushes_ && !session_unflushed_; }

    bool readable() const {
        pollfd p{PQsocket(conn_), POLLIN, 0};
        return p.fd >= 0 && ::poll(&p, 1, 0) > 0;
    }

    // Connects again, with backoff, until the server answers or
    // reconnect_for has passed; then a named, transient error.
    Status reconnect(const std::string& what) {
        using std::chrono::steady_clock;
        const auto start = steady_clock::now();
        const auto give_up = start + options_.reconnect_for;
        auto delay = std::chrono::milliseconds(100);
        for (int attempts = 1;; ++attempts) {
            auto s = connect();
            if (s) {
                ++reconnects_;
                return s;
            }
            // A refused password or session setup will not heal by waiting.
            if (!s.error().transient) return s;
            if (steady_clock::now() + delay > give_up) {
                const auto waited =
                    std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - start).count();
                return make_error("journal", "journal.unavailable",
                                  "cannot " + what + " in " + url_ + ": the server did not come back within " +
                                      std::to_string(waited / 1000) + "." + std::to_string(waited % 1000 / 100) +
                                      " s (" + std::to_string(attempts) + " connection attempt" +
                                      (attempts == 1 ? "" : "s") + "; last: " + s.error().message + ")",
                                  true);
            }
            std::this_thread::sleep_for(delay);
            delay = std::min(delay * 2, std::chrono::milliseconds(2000));
        }
    }

    std::string url_;
    PgOptions options_;
    PGconn* conn_ = nullptr;
    bool in_transaction_ = false;
    bool lost_ = false;                   // the connection broke during this operation
    bool commit_unknown_ = false;         // ... after sending what could have committed
    std::atomic<int64_t> reconnects_{0};  // read by metrics scrapes without the store's lock
    bool server_flushes_ = true;          // the server's own synchronous_commit is not off
    bool session_unflushed_ = false;      // this session set synchronous_commit off
    // What went to the server (StoreCounters), read without the store's lock.
    std::atomic<int64_t> statements_{0}, commits_flushed_{0}, commits_unflushed_{0};
};

// Listens on KILN_PG_CHANNEL on a connection of its own and hands every
// payload to `wake` on its thread; connects again (every half second) when
// the server goes away, until destroyed. A self-pipe ends its poll at once.
// Built once its first LISTEN is in (or failed): a worker claims nothing
// before it can hear of a release, so none falls between the two.
class Listener {
public:
    Listener(const std::string& url, const PgOptions& options, std::function<void(const std::string&)> wake)
        : db_(url, options), wake_(std::move(wake)) {
        if (::pipe(stop_) != 0) stop_[0] = stop_[1] = -1;
        thread_ = std::thread([this] { run(); });
        std::unique_lock<std::mutex> lock(first_mu_);
        first_cv_.wait(lock, [&] { return first_tried_; });
    }
    ~Listener() {
        stopping_ = true;
        if (stop_[1] >= 0) (void)!::write(stop_[1], "x", 1);
        thread_.join();
        for (int fd : stop_)
            if (fd >= 0) ::close(fd);
    }
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

private:
    void run() {
        bool listening = false;
        while (!stopping_) {
            if (!listening) {
                listening = db_.connect() && db_.exec("listen for wake-ups", "LISTEN " KILN_PG_CHANNEL);
                {
                    std::lock_guard<std::mutex> lock(first_mu_);
                    first_tried_ = true;
                }
                first_cv_.notify_all();
                if (!listening) {
                    wait_for(-1, 500);
                    continue;
                }
                // Nodes and slots given back while not listening (before
                // the first LISTEN too): every wait asks again now.
                wake_("all");
            }
            const int fd = PQsocket(db_.raw());
            if (!wait_for(fd, 1000)) continue;
            if (!PQconsumeInput(db_.raw()) || PQstatus(db_.raw()) != CONNECTION_OK) {
                listening = false;
                continue;
            }
            while (PGnotify* n = PQnotifies(db_.raw())) {
                const std::string payload = n->extra ? n->extra : "";
                PQfreemem(n);
                wake_(payload);
            }
        }
    }
    // Waits until `fd` (-1: none) is readable, the stop pipe fires or `ms`
    // pass; true when fd is readable.
    bool wait_for(int fd, int ms) {
        pollfd p[2] = {{stop_[0], POLLIN, 0}, {fd, POLLIN, 0}};
        const int n = ::poll(p, fd >= 0 ? 2 : 1, ms);
        return n > 0 && fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    }

    Connection db_;
    std::function<void(const std::string&)> wake_;
    int stop_[2] = {-1, -1};
    std::atomic<bool> stopping_{false};
    std::mutex first_mu_;
    std::condition_variable first_cv_;
    bool first_tried_ = false;
    std::thread thread_;
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
    PgStore(std::unique_ptr<Connection> conn, bool read_only, std::string url, PgOptions options)
        : db_(std::move(conn)),
          read_only_(read_only),
          worker_(default_worker_id()),
          url_(std::move(url)),
          options_(std::move(options)) {}

    Leases* leases() override { return read_only_ ? nullptr : this; }

    Result<int64_t> begin_run(const RunInfo& info) override {
        return write<int64_t>(
            "start a run",
            [&]() -> Result<int64_t> {
                auto r =
                    db_->exec("start a run",
                              "INSERT INTO runs(command, fleet_path, fleet_sha256, kiln_version, status, started_ms) "
                              "VALUES($1,$2,$3,$4,'running',$5) RETURNING id",
                              Params()
                                  .add(info.command)
                                  .add(info.fleet_path)
                                  .add(info.fleet_sha256)
                                  .add(info.kiln_version)
                                  .add(now_ms()));
                if (!r) return r.error();
                notify("run");
                return r->integer(0, 0);
            },
            Again::Unsent);
    }

    Status end_run(int64_t run_id, const std::string& status) override {
        // Flushed: the run's last word, and the commit that makes every
        // unflushed one before it durable.
        return write<void>("end a run", [&]() -> Status {
            const std::string what = "end run " + std::to_string(run_id);
            return db_->transaction(what, Commit::Flushed, [&]() -> Status {
                auto r = db_->exec(what, "UPDATE runs SET status=$1, ended_ms=$2 WHERE id=$3",
                                   Params().add(status).add(now_ms()).add(run_id));
                if (!r) return r.error();
                if (r->affected() == 0)
                    return make_error(
                        "journal", "journal.unknown_run",
                        "cannot end run " + std::to_string(run_id) + " in " + db_->url() + ": no such run");
                return ok_status();
            });
        });
    }

    Result<std::vector<RunSummary>> runs(int limit) override {
        using R = std::vector<RunSummary>;
        return read<R>([&]() -> Result<R> {
            Params p;
            if (limit > 0)
                p.add(limit);
            else
                p.null();
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
            auto r =
                db_->exec("read the verified hash of " + node + "/" + stage,
                          "SELECT input_hash FROM verified WHERE node=$1 AND stage=$2", Params().add(node).add(stage));
            if (!r) return r.error();
            if (r->count() == 0) return R();
            return R(r->text(0, 0));
        });
    }

    Status record_stage(const StageRecord& rec) override {
        // One transaction: the result row and the verified hash land
        // together. Flushed: the stage's durable end. A skipped stage is
        // not flushed: it did nothing, and the verified hash it upserts is
        // the one already there (a converged stage is skipped only then).
        const Commit commit = rec.outcome == "skipped" ? Commit::Unflushed : Commit::Flushed;
        return write<void>(
            "record a stage",
            [&]() -> Status {
                const std::string what = "record stage " + rec.node + "/" + rec.stage;
                auto record = [&]() -> Status {
                    // The verified hash rides on the result row's insert:
                    // one statement, behind the same fence (so unflushed, it
                    // needs no transaction around it).
                    const bool verified = rec.outcome == "verified" || rec.outcome == "skipped";
                    auto r = fenced_exec(
                        rec.node, what,
                        ", result AS (INSERT INTO stage_results(run_id, node, stage, input_hash, outcome, error, "
                        "attempts, actions, started_ms, ended_ms) SELECT $4::bigint, $1, $5, $6, $7, $8, $9::int, "
                        "$10::int, $11::bigint, $12::bigint FROM fence RETURNING 1), "
                        "hash AS (INSERT INTO verified(node, stage, input_hash, run_id, verified_ms, generation) "
                        "SELECT $1, $5, $6, $4::bigint, $13::bigint, $3::bigint FROM result WHERE $14::boolean "
                        "ON CONFLICT(node, stage) DO UPDATE SET input_hash=excluded.input_hash, "
                        "run_id=excluded.run_id, verified_ms=excluded.verified_ms, "
                        "generation=excluded.generation) "
                        "SELECT 1 FROM result",
                        Params()
                            .add(rec.run_id)
                            .add(rec.stage)
                            .add(rec.input_hash)
                            .add(rec.outcome)
                            .add(rec.error)
                            .add(rec.attempts)
                            .add(rec.actions)
                            .add(rec.started_ms)
                            .add(rec.ended_ms)
                            .add(rec.ended_ms ? rec.ended_ms : now_ms())
                            .add(std::string(verified ? "true" : "false")));
                    if (!r) return r.error();
                    return ok_status();
                };
                if (commit == Commit::Unflushed) return record();
                return db_->transaction(what, commit, record);
            },
            Again::Unsent);
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
        // written only while the lease's generation is still ours, and
        // its commit is flushed before the effect can happen (which also
        // flushes every earlier commit of this session: the WAL is one
        // sequence).
        return write<int64_t>(
            "record an action",
            [&]() -> Result<int64_t> {
                const std::string what = "record action " + action_id + " of " + node;
                int64_t id = 0;
                auto s = db_->transaction(what, Commit::Flushed, [&]() -> Status {
                    auto r = fenced_exec(node, what,
                                         "INSERT INTO actions(run_id, node, stage, action_id, description, started_ms) "
                                         "SELECT $4::bigint, $1, $5, $6, $7, $8::bigint FROM fence RETURNING id",
                                         Params().add(run_id).add(stage).add(action_id).add(description).add(now_ms()));
                    if (!r) return r.error();
                    id = r->integer(0, 0);
                    return ok_status();
                });
                if (!s) return s.error();
                action_node_[id] = node;
                return id;
            },
            Again::Unsent);
    }

    Status end_action(int64_t row, const std::string& outcome, const std::string& error) override {
        // Unflushed: the next flushed commit of this session (the stage's
        // result, the next action) carries it; lost with a server crash
        // before that, the action reads as unfinished and is re-observed.
        return write<void>("end an action", [&]() -> Status {
            const std::string what = "end action row " + std::to_string(row);
            auto mapped = action_node_.find(row);
            if (mapped != action_node_.end() && held_.count(mapped->second)) {
                auto r = fenced_exec(mapped->second, what,
                                     "UPDATE actions SET ended_ms=$4::bigint, outcome=$5, error=$6 FROM fence "
                                     "WHERE id=$7::bigint",
                                     Params().add(now_ms()).add(outcome).add(error).add(row), false);
                if (!r) return r.error();
                if (r->affected() == 0) {
                    if (auto f = fence(mapped->second); !f) return f;
                    return make_error("journal", "journal.unknown_action",
                                      "cannot " + what + " in " + db_->url() + ": no such row");
                }
                action_node_.erase(mapped);
                return ok_status();
            }
            auto end = [&]() -> Status {
                auto r = db_->exec(what,
                                   "UPDATE actions SET ended_ms=$1, outcome=$2, error=$3 WHERE id=$4 "
                                   "RETURNING node",
                                   Params().add(now_ms()).add(outcome).add(error).add(row));
                if (!r) return r.error();
                if (r->count() == 0)
                    return make_error("journal", "journal.unknown_action",
                                      "cannot " + what + " in " + db_->url() + ": no such row");
                return fence(r->text(0, 0));  // rolls the end back when the lease is gone
            };
            if (held_.empty()) return end();
            return db_->transaction(what, Commit::Unflushed, end);
        });
    }

    Status record_event(const EventRecord& e) override {
        // Unflushed: an event lost with a server crash costs a line of history.
        return write<void>(
            "record an event",
            [&]() -> Status {
                auto r = fenced_exec(
                    e.node, "record event " + e.kind,
                    "INSERT INTO events(run_id, ts_ms, node, stage, kind, message) "
                    "SELECT $4::bigint, $5::bigint, $1, $6, $7, $8 FROM fence",
                    Params().add(e.run_id).add(e.ts_ms ? e.ts_ms : now_ms()).add(e.stage).add(e.kind).add(e.message));
                if (!r) return r.error();
                return ok_status();
            },
            Again::Unsent);
    }

    Status set_node_state(const NodeState& s) override {
        // Unflushed: a node's state is progress; its durable facts are the
        // stage results and actions.
        return write<void>("set a node state", [&]() -> Status {
            auto r = fenced_exec(s.node, "set the state of " + s.node,
                                 "INSERT INTO node_state(node, state, detail, stage, error, updated_ms, run_id) "
                                 "SELECT $1, $4, $5, $6, $7, $8::bigint, $9::bigint FROM fence "
                                 "ON CONFLICT(node) DO UPDATE SET state=excluded.state, "
                                 "detail=excluded.detail, stage=excluded.stage, error=excluded.error, "
                                 "updated_ms=excluded.updated_ms, run_id=excluded.run_id",
                                 Params()
                                     .add(s.state)
                                     .add(s.detail)
                                     .add(s.stage)
                                     .add(s.error)
                                     .add(s.updated_ms ? s.updated_ms : now_ms())
                                     .add(s.run_id));
            if (!r) return r.error();
            return ok_status();
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
            if (limit > 0)
                p.add(limit);
            else
                p.null();
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

    Status put_record(const NodeRecord& rec) override {
        // Unflushed: the stage result written after it (flushed) makes it
        // durable; a record lost with a crash before that is one the stage
        // was not verified on, so it runs again.
        return write<void>(
            "record a result",
            [&]() -> Status {
                auto r = fenced_exec(rec.node, "record the " + rec.kind + " of " + rec.node,
                                     "INSERT INTO records(run_id, node, stage, kind, body_schema, body, ts_ms) "
                                     "SELECT $4::bigint, $1, $5, $6, $7::integer, $8, $9::bigint FROM fence",
                                     Params()
                                         .add(rec.run_id)
                                         .add(rec.stage)
                                         .add(rec.kind)
                                         .add(rec.schema)
                                         .add(rec.body)
                                         .add(rec.ts_ms ? rec.ts_ms : now_ms()));
                if (!r) return r.error();
                return ok_status();
            },
            Again::Unsent);
    }

    Result<std::optional<NodeRecord>> latest_record(const std::string& node, const std::string& kind) override {
        using R = std::optional<NodeRecord>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the " + kind + " of " + node,
                               "SELECT run_id, node, stage, kind, body_schema, body, ts_ms FROM records "
                               "WHERE node=$1 AND kind=$2 ORDER BY id DESC LIMIT 1",
                               Params().add(node).add(kind));
            if (!r) return r.error();
            if (r->count() == 0) return R();
            return R(NodeRecord{r->integer(0, 0), r->text(0, 1), r->text(0, 2), r->text(0, 3),
                                static_cast<int>(r->integer(0, 4)), r->text(0, 5), r->integer(0, 6)});
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
        return write<R>(
            "claim a node",
            [&]() -> Result<R> {
                const std::string what = "claim " + node + "/" + stage;
                const auto asked = std::chrono::steady_clock::now();
                R out = LeaseHolder{};
                // Flushed: the generation that fences this worker's writes.
                // A refused claim rolls back ("lease.refused"): it wrote
                // nothing and commits nothing.
                auto s = db_->transaction(what, Commit::Flushed,
                                          [&]() -> Status { return claim_in(what, node, stage, ttl.count(), out); });
                if (!s && s.error().code != "lease.refused") return s.error();
                if (auto* lease = std::get_if<Lease>(&out)) {
                    held_[node] = *lease;
                    fresh_[node] = {asked, ttl};
                }
                return out;
            },
            Again::Unsent);
    }

    Result<StageClaim> claim_stage(const std::string& node, const std::string& stage, std::chrono::milliseconds ttl,
                                   int unavailable_capacity, std::vector<std::pair<std::string, int>> limits) override {
        std::sort(limits.begin(), limits.end());  // one order for every worker (take_slots)
        return write<StageClaim>(
            "claim a node",
            [&]() -> Result<StageClaim> {
                const std::string what = "claim " + node + "/" + stage;
                const auto asked = std::chrono::steady_clock::now();
                StageClaim c{LeaseHolder{}, false, std::nullopt};
                std::vector<std::pair<std::string, int>> making;
                bool took_unavailable = false;
                // One flushed transaction for the lease and every slot: what
                // fences and what limits are durable before any side effect,
                // for one flush. A full limit keeps what came before it (the
                // lease; the unavailable slot), as separate calls would.
                auto s = db_->transaction(what, Commit::Flushed, [&]() -> Status {
                    if (auto st = claim_in(what, node, stage, ttl.count(), c.lease); !st) return st;
                    std::vector<std::string> keys, slots;  // picked, taken together
                    if (unavailable_capacity > 0) {
                        std::optional<std::string> full;
                        if (auto st = pick_slots(what, node, {{kUnavailable, unavailable_capacity}}, full, making, keys,
                                                 slots);
                            !st)
                            return st;
                        if (full) {
                            c.unavailable_full = true;
                            return ok_status();
                        }
                        took_unavailable = true;
                    }
                    if (auto st = pick_slots(what, node, limits, c.full, making, keys, slots); !st) return st;
                    return take_picked(what, node, keys, slots, ttl);
                });
                if (!s && s.error().code != "lease.refused") return s.error();
                if (auto* lease = std::get_if<Lease>(&c.lease)) {
                    slot_rows_.insert(making.begin(), making.end());
                    held_[node] = *lease;
                    fresh_[node] = {asked, ttl};
                    if (took_unavailable) unavailable_.insert(node);
                }
                return c;
            },
            Again::Unsent);
    }

    Result<std::vector<std::string>> renew(std::chrono::milliseconds ttl) override {
        using R = std::vector<std::string>;
        return write<R>("renew leases", [&]() -> Result<R> {
            R lost;
            if (registered_) {
                auto w = db_->exec("renew the heartbeat of " + worker_,
                                   "UPDATE workers SET heartbeat_ms=" KILN_PG_NOW ", expires_ms=" KILN_PG_NOW
                                   " + $2::bigint WHERE worker=$1",
                                   Params().add(worker_).add(static_cast<int64_t>(ttl.count())));
                if (!w) return w.error();
            }
            // A failed node keeps its unavailable slot with no lease held.
            if (held_.empty() && unavailable_.empty()) return lost;
            const auto asked = std::chrono::steady_clock::now();
            // Only the nodes held now: a release lost with a server crash
            // (releases are unflushed) then expires instead of being kept.
            std::set<std::string> nodes = unavailable_;
            for (const auto& [node, lease] : held_) nodes.insert(node);
            auto slots = db_->exec("renew the slots of " + worker_,
                                   "UPDATE slots SET lease_until_ms=" KILN_PG_NOW
                                   " + $2::bigint WHERE worker=$1 "
                                   "AND node = ANY($3::text[])",
                                   Params().add(worker_).add(static_cast<int64_t>(ttl.count())).add(text_array(nodes)));
            if (!slots) return slots.error();
            auto r = db_->exec("renew the leases of " + worker_,
                               "UPDATE leases SET lease_until_ms=" KILN_PG_NOW
                               " + $2::bigint WHERE worker=$1 "
                               "AND node = ANY($3::text[]) RETURNING node, generation",
                               Params().add(worker_).add(static_cast<int64_t>(ttl.count())).add(text_array(nodes)));
            if (!r) return r.error();
            std::map<std::string, int64_t> kept;
            for (int i = 0; i < r->count(); ++i) kept[r->text(i, 0)] = r->integer(i, 1);
            for (const auto& [node, lease] : held_) {
                auto k = kept.find(node);
                if (k == kept.end() || k->second != lease.generation) {
                    lost.push_back(node);
                    ++losses_;
                } else {
                    fresh_[node] = {asked, ttl};
                    ++renewals_;
                }
            }
            return lost;
        });
    }

    Status release(const std::string& node) override {
        // Forgotten here at once (the heartbeat stops renewing it); the
        // generation is kept for a run again on a new connection.
        std::optional<int64_t> generation;
        return write<void>("release a lease", [&]() -> Status {
            if (auto it = held_.find(node); it != held_.end()) {
                generation = it->second.generation;
                held_.erase(it);
                fresh_.erase(node);
            }
            if (!generation) return ok_status();
            auto r = db_->exec("release the lease of " + node,
                               "WITH freed AS (UPDATE leases SET worker='', lease_until_ms=0 WHERE node=$1 AND "
                               "worker=$2 AND generation=$3::bigint RETURNING 1) " KILN_PG_WAKE("'node:' || $1"),
                               Params().add(node).add(worker_).add(*generation));
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
        if (limits.empty()) return R();
        return write<R>(
            "take slots",
            [&]() -> Result<R> {
                const std::string what = "take fleet-wide slots for " + node;
                R full;
                std::vector<std::pair<std::string, int>> making;
                // Flushed: a slot must be durable before the side effects
                // it limits (a reconnect after a crash carries on with them).
                auto s = db_->transaction(what, Commit::Flushed, [&]() -> Status {
                    std::vector<std::string> keys, slots;
                    if (auto st = pick_slots(what, node, limits, full, making, keys, slots); !st) return st;
                    // Full: roll back the rows made meanwhile too.
                    if (full) return make_error("journal", "slots.full", *full);
                    return take_picked(what, node, keys, slots, ttl);
                });
                if (!s && !full) return s.error();
                if (s) slot_rows_.insert(making.begin(), making.end());
                return full;
            },
            Again::Unsent);
    }

    Status release_slots(const std::string& node) override {
        return write<void>("release slots", [&]() -> Status {
            auto r = db_->exec("release the slots of " + node,
                               "WITH freed AS (UPDATE slots SET worker='', node='', lease_until_ms=0 WHERE worker=$1 "
                               "AND node=$2 AND key <> $3 RETURNING 1) " KILN_PG_WAKE("'slots'"),
                               Params().add(worker_).add(node).add(std::string(kUnavailable)));
            if (!r) return r.error();
            return ok_status();
        });
    }

    Result<bool> take_unavailable(const std::string& node, int capacity, std::chrono::milliseconds ttl) override {
        auto full = take_slots(node, {{kUnavailable, capacity}}, ttl);
        if (!full) return full.error();
        if (*full) return false;
        std::lock_guard<std::mutex> lock(mu_);
        unavailable_.insert(node);
        return true;
    }

    Status release_unavailable(const std::string& node) override {
        return write<void>("release an unavailable slot", [&]() -> Status {
            unavailable_.erase(node);
            auto r = db_->exec("give back the unavailable slot of " + node,
                               "WITH freed AS (UPDATE slots SET worker='', node='', lease_until_ms=0 WHERE worker=$1 "
                               "AND node=$2 AND key=$3 RETURNING 1) " KILN_PG_WAKE("'slots'"),
                               Params().add(worker_).add(node).add(std::string(kUnavailable)));
            if (!r) return r.error();
            return ok_status();
        });
    }

    Result<std::optional<std::string>> take_lock(const std::string& key, const std::string& node,
                                                 std::chrono::milliseconds ttl) override {
        using R = std::optional<std::string>;
        // A slot of capacity 1 under its own key space: the heartbeat renews
        // it and a dead worker's expires, as every slot does.
        const std::string slot_key = std::string(kLockPrefix) + key;
        auto full = take_slots(node, {{slot_key, 1}}, ttl);
        if (!full) return full.error();
        if (!*full) return R{};
        return read<R>(
            [&]() -> Result<R> {
                auto r = db_->exec("read who holds " + key,
                                   "SELECT worker, node FROM slots WHERE key=$1 AND worker <> '' LIMIT 1",
                                   Params().add(slot_key));
                if (!r) return r.error();
                if (r->count() == 0) return R{"a worker taking it at the same moment"};
                return R{"worker " + r->text(0, 0) + " for node " + r->text(0, 1)};
            },
            Again::Always, "read a lock's holder");
    }

    Status release_lock(const std::string& key) override {
        return write<void>("release a lock", [&]() -> Status {
            auto r = db_->exec("release the lock " + key,
                               "UPDATE slots SET worker='', node='', lease_until_ms=0 WHERE worker=$1 AND key=$2",
                               Params().add(worker_).add(std::string(kLockPrefix) + key));
            if (!r) return r.error();
            if (r->affected() > 0) notify("slots");
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
        const auto age =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - it->second.first);
        if (age < it->second.second / 2) return ok_status();
        return make_error("journal", "lease.stale",
                          "lease on node " + node + " last confirmed " + std::to_string(age.count()) + " ms ago (ttl " +
                              std::to_string(it->second.second.count()) +
                              " ms); claiming it again before any side effect");
    }

    Status register_worker(const std::string& labels, std::chrono::milliseconds ttl) override {
        return write<void>("register a worker", [&]() -> Status {
            char host[256] = {};
            if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
            auto r = db_->exec("register worker " + worker_,
                               "INSERT INTO workers(worker, host, pid, labels, started_ms, heartbeat_ms, expires_ms) "
                               "VALUES($1, $2, $3, $4, " KILN_PG_NOW ", " KILN_PG_NOW ", " KILN_PG_NOW
                               " + $5::bigint) "
                               "ON CONFLICT(worker) DO UPDATE SET host=excluded.host, pid=excluded.pid, "
                               "labels=excluded.labels, started_ms=excluded.started_ms, "
                               "heartbeat_ms=excluded.heartbeat_ms, expires_ms=excluded.expires_ms",
                               Params()
                                   .add(worker_)
                                   .add(std::string(host[0] ? host : "host"))
                                   .add(static_cast<int64_t>(getpid()))
                                   .add(labels)
                                   .add(static_cast<int64_t>(ttl.count())));
            if (!r) return r.error();
            registered_ = true;
            return ok_status();
        });
    }

    Status deregister_worker() override {
        return write<void>("deregister a worker", [&]() -> Status {
            if (!registered_) return ok_status();
            auto r =
                db_->exec("deregister worker " + worker_, "DELETE FROM workers WHERE worker=$1", Params().add(worker_));
            if (!r) return r.error();
            registered_ = false;
            return ok_status();
        });
    }

    void on_wake(std::function<void(const std::string&)> wake) override {
        std::lock_guard<std::mutex> lock(listener_mu_);
        listener_.reset();  // joins the old thread first
        if (wake) listener_ = std::make_unique<Listener>(url_, options_, std::move(wake));
    }

    // Without the store's lock: a scrape must not wait on a reconnect.
    LeaseCounters counters() override {
        return {renewals_.load(),  losses_.load(),         db_->reconnects(),
                db_->statements(), db_->commits_flushed(), db_->commits_unflushed()};
    }

    Result<std::vector<LeaseRow>> live_leases() override {
        using R = std::vector<LeaseRow>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the live leases",
                               "SELECT node, stage, worker, generation, lease_until_ms FROM leases "
                               "WHERE worker <> '' AND lease_until_ms >= " KILN_PG_NOW " ORDER BY node COLLATE \"C\"");
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->text(i, 0), r->text(i, 1), r->text(i, 2), r->integer(i, 3), r->integer(i, 4)});
            return out;
        });
    }

    Result<std::vector<WorkerRow>> live_workers() override {
        using R = std::vector<WorkerRow>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the live workers",
                               "SELECT w.worker, w.host, w.pid, w.labels, w.started_ms, w.heartbeat_ms, w.expires_ms, "
                               "coalesce((SELECT string_agg(l.node, ',' ORDER BY l.node COLLATE \"C\") FROM leases l "
                               "WHERE l.worker = w.worker AND l.lease_until_ms >= " KILN_PG_NOW "), ''), " KILN_PG_NOW
                               " - w.heartbeat_ms "
                               "FROM workers w WHERE w.expires_ms >= " KILN_PG_NOW " ORDER BY w.worker COLLATE \"C\"");
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i) {
                WorkerRow w{r->text(i, 0),    r->text(i, 1),    r->integer(i, 2),
                            r->text(i, 3),    r->integer(i, 4), r->integer(i, 5),
                            r->integer(i, 6), r->integer(i, 8), {}};
                const std::string nodes = r->text(i, 7);
                for (size_t a = 0; a < nodes.size();) {
                    size_t b = nodes.find(',', a);
                    if (b == std::string::npos) b = nodes.size();
                    w.nodes.push_back(nodes.substr(a, b - a));
                    a = b + 1;
                }
                out.push_back(std::move(w));
            }
            return out;
        });
    }

    Result<bool> verified_since(const std::string& node, const std::string& stage, const std::string& input_hash,
                                int64_t generation) override {
        return read<bool>([&]() -> Result<bool> {
            auto r = db_->exec("read what " + node + "/" + stage + " was verified under",
                               "SELECT 1 FROM verified WHERE node=$1 AND stage=$2 AND input_hash=$3 AND "
                               "generation >= $4::bigint",
                               Params().add(node).add(stage).add(input_hash).add(generation));
            if (!r) return r.error();
            return r->count() > 0;
        });
    }

    Result<std::vector<LeaseRow>> lease_rows() override {
        using R = std::vector<LeaseRow>;
        return read<R>([&]() -> Result<R> {
            auto r = db_->exec("read the leases",
                               "SELECT node, stage, CASE WHEN lease_until_ms >= " KILN_PG_NOW
                               " THEN worker ELSE '' END, generation, lease_until_ms, held_from FROM leases "
                               "ORDER BY node COLLATE \"C\"");
            if (!r) return r.error();
            R out;
            for (int i = 0; i < r->count(); ++i)
                out.push_back({r->text(i, 0), r->text(i, 1), r->text(i, 2), r->integer(i, 3), r->integer(i, 4),
                               r->integer(i, 5)});
            return out;
        });
    }

private:
    // Inside a transaction: claims `node` for `stage` (Leases::claim) into
    // `out`; a node another live worker holds fails with "lease.refused",
    // so that the transaction rolls back having written nothing.
    Status claim_in(const std::string& what, const std::string& node, const std::string& stage, int64_t ttl_ms,
                    std::variant<Lease, LeaseHolder>& out) {
        // The next stage of a node this worker holds: one statement, when
        // the row still names this worker at the generation it holds
        // (whether or not the lease ran out meanwhile, as below). The new
        // generation is the held one plus one, so the journal's line is
        // known before it is written; the stage it holds already is not news.
        if (auto it = held_.find(node); it != held_.end()) {
            const int64_t next = it->second.generation + 1;
            auto r = db_->exec(
                what,
                "WITH up AS (UPDATE leases SET stage=$2, generation=generation+1, lease_until_ms=" KILN_PG_NOW
                " + $4::bigint, claimed_ms=" KILN_PG_NOW
                " WHERE node=$1 AND worker=$3 AND generation=$5::bigint RETURNING generation), "
                "ev AS (INSERT INTO events(run_id, ts_ms, node, stage, kind, message) "
                "SELECT 0, $6::bigint, $1, $2, 'lease', $7 FROM up WHERE $8::boolean) "
                "SELECT generation FROM up",
                Params()
                    .add(node)
                    .add(stage)
                    .add(worker_)
                    .add(ttl_ms)
                    .add(it->second.generation)
                    .add(now_ms())
                    .add("worker " + worker_ + " claimed stage " + stage + " (generation " + std::to_string(next) + ")")
                    .add(std::string(it->second.stage == stage ? "false" : "true")));
            if (!r) return r.error();
            if (r->count() == 1) {
                out = Lease{node, stage, worker_, r->integer(0, 0)};
                return ok_status();
            }
            // Taken over, or claimed again elsewhere: the general way.
        }
        // A node this worker holds has its row: no insert to try.
        std::optional<Rows> ins;
        if (!held_.count(node)) {
            auto tried = db_->exec(what,
                                   "INSERT INTO leases(node, stage, worker, generation, held_from, lease_until_ms, "
                                   "claimed_ms) VALUES($1, $2, $3, 1, 1, " KILN_PG_NOW " + $4::bigint, " KILN_PG_NOW
                                   ") "
                                   "ON CONFLICT(node) DO NOTHING RETURNING generation",
                                   Params().add(node).add(stage).add(worker_).add(ttl_ms));
            if (!tried) return tried.error();
            ins = std::move(*tried);
        }
        std::string previous, previous_stage;
        int64_t previous_generation = 0;
        if (!ins || ins->count() == 0) {
            // Row locked by another claimer right now: not waited on.
            auto row = db_->exec(what,
                                 "SELECT worker, generation, lease_until_ms, lease_until_ms < " KILN_PG_NOW
                                 ", stage, held_from FROM leases WHERE node=$1 FOR UPDATE SKIP LOCKED",
                                 Params().add(node));
            if (!row) return row.error();
            if (row->count() == 0) {
                out = LeaseHolder{"(claiming)", 0, 0};
                return make_error("journal", "lease.refused", node);
            }
            previous = row->text(0, 0);
            previous_generation = row->integer(0, 1);
            const bool expired = row->text(0, 3) == "t";
            previous_stage = row->text(0, 4);
            if (!previous.empty() && previous != worker_ && !expired) {
                out = LeaseHolder{previous, previous_generation, row->integer(0, 2), row->integer(0, 5)};
                return make_error("journal", "lease.refused", node);
            }
            auto up =
                db_->exec(what,
                          "UPDATE leases SET stage=$2, worker=$3, generation=generation+1, held_from=generation+1, "
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
        std::string message =
            "worker " + worker_ + " claimed stage " + stage + " (generation " + std::to_string(lease.generation) + ")";
        if (!previous.empty() && previous != worker_) {
            // Its holder died or stalled: what it started and never
            // ended is closed here; the stage observes what really
            // happened before planning anything.
            auto orphans =
                db_->exec(what,
                          "UPDATE actions SET ended_ms=$2, outcome='interrupted', error=$3 "
                          "WHERE node=$1 AND ended_ms=0 RETURNING action_id",
                          Params().add(node).add(now_ms()).add("worker " + previous + " lost its lease (generation " +
                                                               std::to_string(previous_generation) +
                                                               ") before ending this action; re-observed"));
            if (!orphans) return orphans.error();
            message +=
                ", taking over from " + previous + " (generation " + std::to_string(previous_generation) + ", expired)";
            if (orphans->count() > 0)
                message += "; " + std::to_string(orphans->count()) + " unfinished action(s) re-observed";
        }
        auto ev = db_->exec(what,
                            "INSERT INTO events(run_id, ts_ms, node, stage, kind, message) "
                            "VALUES(0, $1, $2, $3, 'lease', $4)",
                            Params().add(now_ms()).add(node).add(stage).add(message));
        if (!ev) return ev.error();
        return ok_status();
    }

    // Inside a transaction: picks a free slot of every (key, capacity) for
    // `node` (its own first: taking again keeps it), locked FOR UPDATE SKIP
    // LOCKED, appending them to `keys`/`slots`; when one is full, sets
    // `full` to its key and appends none. `making`: slot rows this
    // transaction made (known made once it commits).
    Status pick_slots(const std::string& what, const std::string& node,
                      const std::vector<std::pair<std::string, int>>& limits, std::optional<std::string>& full,
                      std::vector<std::pair<std::string, int>>& making, std::vector<std::string>& keys,
                      std::vector<std::string>& slots) {
        std::vector<std::string> k, n;
        for (const auto& [key, capacity] : limits) {
            // Slot rows are never deleted: made once, known made.
            if (!slot_rows_.count({key, capacity})) {
                auto made = db_->exec(what,
                                      "INSERT INTO slots(key, slot) SELECT $1, g "
                                      "FROM generate_series(0, $2::int - 1) g ON CONFLICT DO NOTHING",
                                      Params().add(key).add(capacity));
                if (!made) return made.error();
                making.emplace_back(key, capacity);
            }
            auto free = db_->exec(what,
                                  "SELECT slot FROM slots WHERE key=$1 AND slot < $2::int AND (worker='' OR "
                                  "lease_until_ms < " KILN_PG_NOW
                                  " OR (worker=$3 AND node=$4)) "
                                  "ORDER BY (worker=$3 AND node=$4) DESC, slot LIMIT 1 FOR UPDATE SKIP LOCKED",
                                  Params().add(key).add(capacity).add(worker_).add(node));
            if (!free) return free.error();
            if (free->count() == 0) {
                full = key;
                return ok_status();
            }
            k.push_back(key);
            n.push_back(free->text(0, 0));
        }
        keys.insert(keys.end(), k.begin(), k.end());
        slots.insert(slots.end(), n.begin(), n.end());
        return ok_status();
    }

    // Inside a transaction: takes the picked slots for `node`, all in one
    // statement.
    Status take_picked(const std::string& what, const std::string& node, const std::vector<std::string>& keys,
                       const std::vector<std::string>& slots, std::chrono::milliseconds ttl) {
        if (keys.empty()) return ok_status();
        auto took = db_->exec(what,
                              "UPDATE slots SET worker=$3, node=$4, lease_until_ms=" KILN_PG_NOW
                              " + $5::bigint FROM unnest($1::text[], $2::int[]) AS t(key, slot) "
                              "WHERE slots.key=t.key AND slots.slot=t.slot",
                              Params()
                                  .add(text_array(keys))
                                  .add(text_array(slots))
                                  .add(worker_)
                                  .add(node)
                                  .add(static_cast<int64_t>(ttl.count())));
        if (!took) return took.error();
        return ok_status();
    }

    // Wakes listening workers (on_wake). A statement of its own, after the
    // write it announces committed: a transaction that notifies holds a
    // server-wide lock from its commit until its commit record is flushed,
    // which would serialise every worker's commits behind one fsync; this
    // one writes nothing, so it commits without a flush. Best effort: the
    // bounded poll covers a lost wake-up.
    void notify(const std::string& payload) {
        (void)db_->exec("wake waiting workers", "SELECT pg_notify('" KILN_PG_CHANNEL "', $1)", Params().add(payload));
    }

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

    // A write about `node` in one statement (one round trip), as
    // `body` reads behind "WITH fence AS (...)": while this worker holds a
    // lease on the node, `fence` has one row only if the lease row still
    // names this worker at its generation, locked FOR SHARE until the
    // statement's transaction ends (a takeover waits for it); otherwise
    // one row always. The body writes "... FROM fence" (or, starting with
    // ",", more CTEs first) with its own parameters from $4 ($1 is the
    // node). A write that found no fence row
    // fails with fence()'s "lease.lost"; `expect_row`: every write that
    // passed the fence touches a row (false where the caller judges).
    Result<Rows> fenced_exec(const std::string& node, const std::string& what, const std::string& body,
                             const Params& tail, bool expect_row = true) {
        auto it = node.empty() ? held_.end() : held_.find(node);
        const bool held = it != held_.end();
        Params p;
        p.add(node).add(worker_).add(held ? it->second.generation : int64_t{0});
        p.append(tail);
        const std::string sql =
            std::string(held ? "WITH fence AS (SELECT 1 FROM leases WHERE node=$1 AND worker=$2 AND "
                               "generation=$3::bigint FOR SHARE)"
                             : "WITH fence AS (SELECT 1 WHERE $1::text IS NOT NULL AND $2::text IS NOT NULL AND "
                               "$3::bigint IS NOT NULL)") +
            (body.starts_with(',') ? "" : " ") + body;
        auto r = db_->exec(what, sql.c_str(), p);
        if (!r || !held) return r;
        if (r->affected() > 0 || !expect_row) return r;
        if (auto f = fence(node); !f) return f.error();
        return make_error("journal", "lease.lost",
                          "cannot " + what + " in " + db_->url() + ": the lease of " + node +
                              " changed under the write; this worker stops there");
    }

    // Whether an operation may be run again on a new connection after the
    // old one broke under it. Always: reads and writes that land the same
    // however often they run (updates to a value, deletes, upserts).
    // Unsent: inserts, and transactions that bump counters; run again only
    // when nothing of them can have committed (the break came before
    // COMMIT); otherwise the transient error goes up and the engine's
    // retry observes what really happened.
    enum class Again { Always, Unsent };

    // One connection, one statement at a time: the engine's threads queue
    // here, as they share the SQLite connection. A broken connection is
    // made again first (Connection::ready); an operation it broke under is
    // run again on the new one, at most twice more, as `again` allows.
    template <class T, class F>
    Result<T> read(F&& body, Again again = Again::Always, const char* what = "read the journal") {
        try {
            std::lock_guard<std::mutex> lock(mu_);
            for (int tries = 1;; ++tries) {
                if (auto s = db_->ready(what); !s) return s.error();
                Result<T> r = body();
                if (r.ok() || !db_->lost() || tries == 3) return r;
                if (again == Again::Unsent && db_->commit_unknown()) return r;
            }
        } catch (const std::exception& e) {
            return make_error("journal", "journal.internal", "cannot read " + db_->url() + ": " + e.what());
        }
    }

    template <class T, class F>
    Result<T> write(const char* what, F&& body, Again again = Again::Always) {
        if (read_only_)
            return make_error(
                "journal", "journal.read_only",
                std::string("cannot ") + what + " in " + db_->url() + ": the journal was opened read-only");
        return read<T>(std::forward<F>(body), again, what);
    }

    std::mutex mu_;
    std::unique_ptr<Connection> db_;
    bool read_only_;
    std::string worker_;
    std::map<std::string, Lease> held_;                // node -> the lease this process holds (guarded by mu_)
    std::set<std::string> unavailable_;                // nodes holding an "unavailable" slot (guarded by mu_)
    std::map<int64_t, std::string> action_node_;       // action row -> node, begun and not yet ended (guarded by mu_)
    std::set<std::pair<std::string, int>> slot_rows_;  // (key, capacity) whose slot rows exist (guarded by mu_)
    bool registered_ = false;                          // listed in the workers table (guarded by mu_)
    std::atomic<int64_t> renewals_{0}, losses_{0};     // the heartbeat's work
    std::string url_;
    PgOptions options_;
    std::mutex listener_mu_;
    std::unique_ptr<Listener> listener_;  // while someone waits for wake-ups
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
    return db.transaction("migrate the schema", Commit::Flushed, [&]() -> Status {
        const std::string lock =
            "SELECT pg_advisory_xact_lock(" + std::to_string(kLockSpace) + ", " + std::to_string(kMigrateLock) + ")";
        if (auto l = db.exec("lock the schema", lock.c_str()); !l) return l.error();
        auto version = schema_version(db);  // again, now that we hold the lock
        if (!version) return version.error();
        if (*version > kSchemaVersion) return refuse_newer(db.url(), *version);
        if (*version == 0) {
            if (auto c = db.exec("create the schema",
                                 "CREATE TABLE kiln_schema(version INTEGER PRIMARY KEY, "
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

// Reads the schema version and, unless read-only, brings it to this kiln's.
Status check_schema(Connection& db, const std::string& url, bool read_only) {
    auto version = schema_version(db);
    if (!version) return version.error();
    if (*version > kSchemaVersion) return refuse_newer(url, *version);
    if (*version == kSchemaVersion) return ok_status();
    if (read_only)
        return make_error(
            "journal", "journal.missing",
            "cannot open " + url + ": no kiln journal there yet (schema " + std::to_string(*version) + ")");
    return migrate(db);
}

Result<std::unique_ptr<Store>> open(const std::string& url, const PgOptions& options) {
    if (auto s = check_store_url(url); !s) return s.error();
    auto db = std::make_unique<Connection>(url, options);
    // A first connection that fails is reported at once: a wrong URL or
    // password, or no server, is not waited on.
    if (auto s = db->connect(); !s) return s.error();
    // A server that answered and then went away while the schema was read
    // or migrated (a restart while a worker starts) is connected to again,
    // as any operation's would be (Connection::ready): both land the same
    // however often they run, the migration under its lock.
    for (int tries = 1;; ++tries) {
        auto s = check_schema(*db, url, options.read_only);
        if (s) break;
        if (!db->lost() || tries == 3) return s.error();
        if (auto r = db->ready("open the journal"); !r) return r.error();
    }
    return std::unique_ptr<Store>(std::make_unique<PgStore>(std::move(db), options.read_only, url, options));
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
            "AND l.classid = " +
            std::to_string(kLockSpace) + " AND l.objid = " + std::to_string(kRunLock) + " AND l.granted";
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
    const std::string sql =
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = " + std::to_string(kLockSpace) +
        " AND objid = " + std::to_string(kRunLock) + " AND granted";
    auto r = db.exec("look for a live run", sql.c_str());
    if (!r) return r.error();
    return r->integer(0, 0) > 0;
}

}  // namespace kiln::journal
