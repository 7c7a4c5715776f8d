#include <catch2/catch.hpp>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "provisioner/journal/sqlite_store.h"
#include "tests/support/journal_backends.h"

namespace fs = std::filesystem;
using kiln::journal::EventRecord;
using kiln::journal::NodeState;
using kiln::journal::now_ms;
using kiln::journal::open_sqlite_store;
using kiln::journal::SqliteOptions;
using kiln::journal::StageRecord;
using kiln::journal::Store;

namespace {

// A fresh folder per test; kept self-contained so this file builds with the
// store alone.
class Scratch {
public:
    Scratch() {
        static std::atomic<int> counter{0};
        std::random_device rd;
        path_ = fs::temp_directory_path() / ("kiln-journal-test-" + std::to_string(::getpid()) + "-" +
                                             std::to_string(counter++) + "-" + std::to_string(rd()));
        fs::create_directories(path_);
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

std::unique_ptr<Store> open_rw(const std::string& path) {
    auto r = open_sqlite_store(path, {});
    INFO((r ? std::string() : r.error().str()));
    REQUIRE(r.ok());
    return std::move(r).value();
}

// Raw SQLite access for checks the interface deliberately does not offer.
class RawDb {
public:
    explicit RawDb(const std::string& path) {
        REQUIRE(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
        sqlite3_busy_timeout(db_, 10000);
    }
    ~RawDb() { sqlite3_close(db_); }
    RawDb(const RawDb&) = delete;
    RawDb& operator=(const RawDb&) = delete;

    std::string text(const std::string& sql) {
        sqlite3_stmt* s = nullptr;
        REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
        std::string out;
        if (sqlite3_step(s) == SQLITE_ROW) {
            auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
            out = p ? p : "";
        }
        sqlite3_finalize(s);
        return out;
    }
    int64_t integer(const std::string& sql) { return std::stoll(text(sql)); }
    void exec(const std::string& sql) {
        REQUIRE(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    }

private:
    sqlite3* db_ = nullptr;
};

StageRecord stage_record(int64_t run, const std::string& node, const std::string& stage, const std::string& hash,
                         const std::string& outcome, int64_t started = 1000, int64_t ended = 2000) {
    StageRecord r;
    r.run_id = run;
    r.node = node;
    r.stage = stage;
    r.input_hash = hash;
    r.outcome = outcome;
    r.error = outcome == "failed" ? "boom" : "";
    r.attempts = 2;
    r.actions = 3;
    r.started_ms = started;
    r.ended_ms = ended;
    return r;
}

// The store-generic cases run once per journal (TEMPLATE_TEST_CASE), each
// on a fresh, empty one; PostgreSQL's are skipped where it is not installed.
#define JOURNAL_BACKENDS kiln::test::SqliteJournal, kiln::test::PgJournal
// `b` is the name it declares: parentheses would not leave a declaration.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define NEED_BACKEND(b)                          \
    TestType b;                                  \
    if (!b.ready()) {                            \
        kiln::test::report_skipped(b.why_not()); \
        return;                                  \
    }
// NOLINTEND(bugprone-macro-parentheses)

template <class Backend>
std::unique_ptr<Store> open_rw(const Backend& b) {
    auto r = b.open(false);
    INFO((r ? std::string() : r.error().str()));
    REQUIRE(r.ok());
    return std::move(r).value();
}

template <class Backend>
std::unique_ptr<Store> open_ro(const Backend& b) {
    auto r = b.open(true);
    INFO((r ? std::string() : r.error().str()));
    REQUIRE(r.ok());
    return std::move(r).value();
}

int64_t new_run(Store& s) {
    auto r = s.begin_run({"apply", "/etc/kiln/fleet.toml", "abc123", "0.1.0"});
    REQUIRE(r.ok());
    return *r;
}

void require_ok(const kiln::Status& s) {
    INFO((s ? std::string() : s.error().str()));
    REQUIRE(s.ok());
}

}  // namespace

TEST_CASE("journal: now_ms is wall-clock milliseconds", "[journal]") {
    const auto sys =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const auto t = now_ms();
    REQUIRE(t >= sys);
    REQUIRE(t - sys < 5000);
    REQUIRE(t > 1'600'000'000'000);  // after 2020: milliseconds, not seconds
}

TEMPLATE_TEST_CASE("journal: runs round trip, newest first, end_run sets status and time", "[journal]",
                   JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t before = now_ms();
    const int64_t a = new_run(*store);
    auto b_r = store->begin_run({"reimage", "f.toml", "def", "0.2.0"});
    REQUIRE(b_r.ok());
    const int64_t b = *b_r;
    const int64_t after = now_ms();
    REQUIRE(b > a);

    auto runs = store->runs(0);
    REQUIRE(runs.ok());
    REQUIRE(runs->size() == 2);
    REQUIRE((*runs)[0].id == b);
    REQUIRE((*runs)[0].command == "reimage");
    REQUIRE((*runs)[1].id == a);
    REQUIRE((*runs)[1].command == "apply");
    for (const auto& r : *runs) {
        REQUIRE(r.status == "running");
        REQUIRE(r.started_ms >= before);
        REQUIRE(r.started_ms <= after);
        REQUIRE(r.ended_ms == 0);
    }

    require_ok(store->end_run(a, "completed"));
    runs = store->runs(0);
    REQUIRE(runs.ok());
    REQUIRE((*runs)[1].status == "completed");
    REQUIRE((*runs)[1].ended_ms >= (*runs)[1].started_ms);
    REQUIRE((*runs)[0].status == "running");

    auto one = store->runs(1);
    REQUIRE(one.ok());
    REQUIRE(one->size() == 1);
    REQUIRE((*one)[0].id == b);

    auto bad = store->end_run(9999, "failed");
    REQUIRE_FALSE(bad.ok());
    REQUIRE(bad.error().domain == "journal");
    REQUIRE(bad.error().code == "journal.unknown_run");

    // The fields the summary leaves out are still kept.
    store.reset();
    REQUIRE(jb.text("SELECT fleet_path || '|' || fleet_sha256 || '|' || kiln_version FROM runs WHERE id=" +
                    std::to_string(a)) == "/etc/kiln/fleet.toml|abc123|0.1.0");
}

TEMPLATE_TEST_CASE("journal: last_verified_hash follows verified/skipped, ignores failed/interrupted", "[journal]",
                   JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);

    auto none = store->last_verified_hash("n1", "firmware");
    REQUIRE(none.ok());
    REQUIRE_FALSE(none->has_value());

    require_ok(store->record_stage(stage_record(run, "n1", "firmware", "h1", "verified")));
    auto h = store->last_verified_hash("n1", "firmware");
    REQUIRE(h.ok());
    REQUIRE(h->value() == "h1");

    for (const char* outcome : {"failed", "interrupted", "timed_out", "quarantined"}) {
        require_ok(store->record_stage(stage_record(run, "n1", "firmware", std::string("bad-") + outcome, outcome)));
        h = store->last_verified_hash("n1", "firmware");
        REQUIRE(h.ok());
        REQUIRE(h->value() == "h1");
    }

    require_ok(store->record_stage(stage_record(run, "n1", "firmware", "h2", "skipped")));
    h = store->last_verified_hash("n1", "firmware");
    REQUIRE(h.ok());
    REQUIRE(h->value() == "h2");

    require_ok(store->record_stage(stage_record(run, "n1", "firmware", "h3", "verified")));
    h = store->last_verified_hash("n1", "firmware");
    REQUIRE(h->value() == "h3");

    // Other stages and nodes are independent.
    require_ok(store->record_stage(stage_record(run, "n1", "bios", "b1", "verified")));
    REQUIRE(store->last_verified_hash("n1", "bios")->value() == "b1");
    REQUIRE(store->last_verified_hash("n1", "firmware")->value() == "h3");
    REQUIRE_FALSE(store->last_verified_hash("n2", "firmware")->has_value());

    // Every result is kept, not only the verified ones, with all its fields.
    store.reset();
    REQUIRE(jb.integer("SELECT count(*) FROM stage_results WHERE node='n1' AND stage='firmware'") == 7);
    REQUIRE(jb.text("SELECT run_id||'|'||input_hash||'|'||outcome||'|'||error||'|'||attempts||'|'||actions||'|'||"
                    "started_ms||'|'||ended_ms FROM stage_results WHERE input_hash='bad-failed'") ==
            std::to_string(run) + "|bad-failed|failed|boom|2|3|1000|2000");
}

TEMPLATE_TEST_CASE("journal: record_stage with an unknown run is refused and changes nothing", "[journal]",
                   JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    auto s = store->record_stage(stage_record(4242, "n1", "firmware", "h1", "verified"));
    REQUIRE_FALSE(s.ok());
    REQUIRE(s.error().code == "journal.unknown_run");
    REQUIRE(s.error().message.find(jb.where()) != std::string::npos);
    REQUIRE_FALSE(store->last_verified_hash("n1", "firmware")->has_value());
    auto hist = store->history("n1", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->empty());
    // The store is still usable after the failed transaction.
    const int64_t run = new_run(*store);
    require_ok(store->record_stage(stage_record(run, "n1", "firmware", "h1", "verified")));
    REQUIRE(store->last_verified_hash("n1", "firmware")->value() == "h1");
}

TEMPLATE_TEST_CASE("journal: forget_verified drops one stage or all stages of a node", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    for (const char* node : {"n1", "n2"})
        for (const char* stage : {"firmware", "bios", "os"})
            require_ok(store->record_stage(stage_record(run, node, stage, std::string(node) + stage, "verified")));

    require_ok(store->forget_verified("n1", "bios"));
    REQUIRE_FALSE(store->last_verified_hash("n1", "bios")->has_value());
    REQUIRE(store->last_verified_hash("n1", "firmware")->value() == "n1firmware");
    REQUIRE(store->last_verified_hash("n1", "os")->value() == "n1os");
    REQUIRE(store->last_verified_hash("n2", "bios")->value() == "n2bios");

    require_ok(store->forget_verified("n1", ""));
    for (const char* stage : {"firmware", "bios", "os"}) {
        REQUIRE_FALSE(store->last_verified_hash("n1", stage)->has_value());
        REQUIRE(store->last_verified_hash("n2", stage)->value() == std::string("n2") + stage);
    }
    // Forgetting what is not there is not an error.
    require_ok(store->forget_verified("n1", ""));
    require_ok(store->forget_verified("nobody", "bios"));

    // The results themselves stay in the history.
    auto hist = store->history("n1", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->size() == 3);
}

TEMPLATE_TEST_CASE("journal: actions round trip through history", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    const int64_t before = now_ms();
    auto a1 = store->begin_action(run, "n1", "firmware", "flash-bmc", "flash BMC 1.2 -> 1.3");
    auto a2 = store->begin_action(run, "n1", "firmware", "flash-bios", "flash BIOS 2.0 -> 2.1");
    auto a3 = store->begin_action(run, "n1", "bios", "set-attrs", "set 3 attributes");
    REQUIRE(a1.ok());
    REQUIRE(a2.ok());
    REQUIRE(a3.ok());
    REQUIRE(*a1 != *a2);
    REQUIRE(*a2 != *a3);
    require_ok(store->end_action(*a1, "ok", ""));
    require_ok(store->end_action(*a2, "failed", "Redfish 503"));

    auto hist = store->history("n1", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->size() == 3);
    int seen = 0;
    for (const auto& e : *hist) {
        REQUIRE(e.kind == "action");
        REQUIRE(e.run_id == run);
        REQUIRE(e.ts_ms >= before);
        if (e.name == "flash-bmc") {
            ++seen;
            REQUIRE(e.stage == "firmware");
            REQUIRE(e.text == "flash BMC 1.2 -> 1.3");
            REQUIRE(e.outcome == "ok");
            REQUIRE(e.error.empty());
        } else if (e.name == "flash-bios") {
            ++seen;
            REQUIRE(e.outcome == "failed");
            REQUIRE(e.error == "Redfish 503");
        } else if (e.name == "set-attrs") {
            ++seen;
            REQUIRE(e.stage == "bios");
            REQUIRE(e.outcome.empty());  // never finished
        }
    }
    REQUIRE(seen == 3);

    auto bad = store->end_action(*a3 + 1000, "ok", "");
    REQUIRE_FALSE(bad.ok());
    REQUIRE(bad.error().code == "journal.unknown_action");

    store.reset();
    REQUIRE(jb.integer("SELECT count(*) FROM actions WHERE ended_ms >= started_ms AND ended_ms > 0") == 2);
    REQUIRE(jb.integer("SELECT ended_ms FROM actions WHERE id=" + std::to_string(*a3)) == 0);
}

TEMPLATE_TEST_CASE("journal: events round trip and ts 0 means now", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    require_ok(store->record_event({run, 12345, "n1", "os", "retry", "attempt 2 after 503"}));
    const int64_t before = now_ms();
    require_ok(store->record_event({run, 0, "n1", "os", "stage.start", "starting"}));
    require_ok(store->record_event({run, 777, "", "", "stop", "run-level"}));

    auto hist = store->history("n1", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->size() == 2);
    REQUIRE((*hist)[0].kind == "event");
    REQUIRE((*hist)[0].name == "stage.start");
    REQUIRE((*hist)[0].ts_ms >= before);
    REQUIRE((*hist)[1].name == "retry");
    REQUIRE((*hist)[1].text == "attempt 2 after 503");
    REQUIRE((*hist)[1].stage == "os");
    REQUIRE((*hist)[1].ts_ms == 12345);
    REQUIRE((*hist)[1].run_id == run);
    REQUIRE((*hist)[1].outcome.empty());

    auto runlevel = store->history("", 0);
    REQUIRE(runlevel.ok());
    REQUIRE(runlevel->size() == 1);
    REQUIRE((*runlevel)[0].name == "stop");
}

TEMPLATE_TEST_CASE("journal: node states upsert, ordered by node name", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    require_ok(store->set_node_state({"gpu-b", "running", "waiting", "firmware", "", 100, run}));
    require_ok(store->set_node_state({"gpu-a", "pending", "", "", "", 200, run}));
    require_ok(store->set_node_state({"gpu-c", "failed", "", "bios", "BMC unreachable", 300, run}));

    auto states = store->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == 3);
    REQUIRE((*states)[0].node == "gpu-a");
    REQUIRE((*states)[1].node == "gpu-b");
    REQUIRE((*states)[2].node == "gpu-c");
    REQUIRE((*states)[1].state == "running");
    REQUIRE((*states)[1].detail == "waiting");
    REQUIRE((*states)[1].stage == "firmware");
    REQUIRE((*states)[1].updated_ms == 100);
    REQUIRE((*states)[1].run_id == run);
    REQUIRE((*states)[2].error == "BMC unreachable");

    // Upsert replaces every field of the row.
    require_ok(store->set_node_state({"gpu-b", "ready", "verified", "os", "", 400, run}));
    const int64_t before = now_ms();
    require_ok(store->set_node_state({"gpu-c", "quarantined", "", "bios", "bad DIMM", 0, run}));
    states = store->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == 3);
    REQUIRE((*states)[1].state == "ready");
    REQUIRE((*states)[1].detail == "verified");
    REQUIRE((*states)[1].stage == "os");
    REQUIRE((*states)[1].updated_ms == 400);
    REQUIRE((*states)[2].state == "quarantined");
    REQUIRE((*states)[2].error == "bad DIMM");
    REQUIRE((*states)[2].updated_ms >= before);  // 0 means now
}

TEMPLATE_TEST_CASE("journal: history merges stages, actions and events newest first, with a limit", "[journal]",
                   JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    const int64_t t0 = now_ms();

    require_ok(store->record_event({run, t0 - 10'000, "n1", "firmware", "stage.start", "oldest"}));
    require_ok(store->record_stage(stage_record(run, "n1", "firmware", "hf", "verified", t0 - 9'000, t0 - 5'000)));
    auto act = store->begin_action(run, "n1", "bios", "set-attrs", "set attributes");  // ts = now
    REQUIRE(act.ok());
    require_ok(store->end_action(*act, "ok", ""));
    require_ok(store->record_event({run, t0 + 5'000, "n1", "bios", "retry", "newer"}));
    // ended_ms 0 (never finished): ordered by its start.
    require_ok(store->record_stage(stage_record(run, "n1", "os", "ho", "interrupted", t0 + 10'000, 0)));
    // Another node's rows never show up.
    require_ok(store->record_event({run, t0 + 20'000, "n2", "os", "retry", "other node"}));
    require_ok(store->record_stage(stage_record(run, "n2", "os", "x", "verified", t0, t0 + 20'000)));

    auto hist = store->history("n1", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->size() == 5);
    REQUIRE((*hist)[0].kind == "stage");
    REQUIRE((*hist)[0].name == "interrupted");
    REQUIRE((*hist)[0].outcome == "interrupted");
    REQUIRE((*hist)[0].text == "ho");
    REQUIRE((*hist)[0].ts_ms == t0 + 10'000);
    REQUIRE((*hist)[1].kind == "event");
    REQUIRE((*hist)[1].text == "newer");
    REQUIRE((*hist)[2].kind == "action");
    REQUIRE((*hist)[2].name == "set-attrs");
    REQUIRE((*hist)[2].text == "set attributes");
    REQUIRE((*hist)[2].outcome == "ok");
    REQUIRE((*hist)[3].kind == "stage");
    REQUIRE((*hist)[3].name == "verified");
    REQUIRE((*hist)[3].stage == "firmware");
    REQUIRE((*hist)[3].ts_ms == t0 - 5'000);  // ended, not started
    REQUIRE((*hist)[4].kind == "event");
    REQUIRE((*hist)[4].text == "oldest");
    for (size_t i = 1; i < hist->size(); ++i) REQUIRE((*hist)[i - 1].ts_ms >= (*hist)[i].ts_ms);

    auto top2 = store->history("n1", 2);
    REQUIRE(top2.ok());
    REQUIRE(top2->size() == 2);
    REQUIRE((*top2)[0].text == "ho");
    REQUIRE((*top2)[1].text == "newer");

    auto n2 = store->history("n2", 0);
    REQUIRE(n2.ok());
    REQUIRE(n2->size() == 2);
}

TEMPLATE_TEST_CASE("journal: history ties on one millisecond are deterministic", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    const int64_t t = 1'700'000'000'000;
    require_ok(store->record_event({run, t, "n1", "os", "first", ""}));
    require_ok(store->record_event({run, t, "n1", "os", "second", ""}));
    require_ok(store->record_stage(stage_record(run, "n1", "os", "h", "verified", t - 1, t)));
    auto hist = store->history("n1", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->size() == 3);
    REQUIRE((*hist)[0].kind == "stage");   // the result is written after its events
    REQUIRE((*hist)[1].name == "second");  // then newer rows first
    REQUIRE((*hist)[2].name == "first");
}

TEMPLATE_TEST_CASE("journal: records round trip, the newest of a kind per node, readable read-only", "[journal]",
                   JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    {
        auto store = open_rw(jb);
        auto none = store->latest_record("n1", "smoke.result");
        REQUIRE(none.ok());
        REQUIRE_FALSE(none->has_value());
        const int64_t run = new_run(*store);
        require_ok(store->put_record({run, "n1", "smoke", "smoke.result", 1, R"({"verdict":"fail"})", 1000}));
        require_ok(store->put_record({run, "n1", "smoke", "smoke.result", 1, R"({"verdict":"pass"})", 900}));
        require_ok(store->put_record({run, "n1", "handover", "handover", 1, R"({"state":"ready"})", 0}));
        require_ok(store->put_record({run, "n2", "smoke", "smoke.result", 1, R"({"verdict":"fail"})", 0}));
    }
    auto store = open_ro(jb);
    // The newest by insertion, whatever its time says (a clock stepped back).
    auto latest = store->latest_record("n1", "smoke.result");
    REQUIRE(latest.ok());
    REQUIRE(latest->has_value());
    REQUIRE((*latest)->body == R"({"verdict":"pass"})");
    REQUIRE((*latest)->node == "n1");
    REQUIRE((*latest)->stage == "smoke");
    REQUIRE((*latest)->kind == "smoke.result");
    REQUIRE((*latest)->schema == 1);
    REQUIRE((*latest)->ts_ms == 900);
    REQUIRE((*latest)->run_id == 1);
    auto hand = store->latest_record("n1", "handover");
    REQUIRE(hand.ok());
    REQUIRE(hand->has_value());
    REQUIRE((*hand)->ts_ms > 0);  // 0 means now
    REQUIRE((*store->latest_record("n2", "smoke.result"))->body == R"({"verdict":"fail"})");
    REQUIRE_FALSE(store->latest_record("n2", "handover")->has_value());
    auto refused = store->put_record({1, "n1", "smoke", "smoke.result", 1, "{}", 0});
    REQUIRE_FALSE(refused.ok());
    REQUIRE(refused.error().code == "journal.read_only");
}

TEST_CASE("journal: a schema-1 journal reads with no records, and a writing open adds them", "[journal]") {
    Scratch dir;
    const std::string path = dir.file("old.db");
    {
        auto store = open_rw(path);
        require_ok(store->set_node_state({"n1", "ready", "", "handover", "", 9, 0}));
    }
    {
        // As kiln wrote it before the records table.
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
        REQUIRE(sqlite3_exec(db, "DROP TABLE records; PRAGMA user_version=1", nullptr, nullptr, nullptr) == SQLITE_OK);
        sqlite3_close(db);
    }
    {
        SqliteOptions ro;
        ro.read_only = true;
        auto store = open_sqlite_store(path, ro);
        INFO((store ? std::string() : store.error().str()));
        REQUIRE(store.ok());
        REQUIRE((*store)->node_states()->size() == 1);
        auto none = (*store)->latest_record("n1", "smoke.result");
        REQUIRE(none.ok());
        REQUIRE_FALSE(none->has_value());
        RawDb raw(path);
        REQUIRE(raw.integer("PRAGMA user_version") == 1);  // a reader changed nothing
    }
    auto store = open_rw(path);
    require_ok(store->put_record({0, "n1", "smoke", "smoke.result", 1, "{}", 0}));
    REQUIRE(store->latest_record("n1", "smoke.result")->has_value());
    REQUIRE(store->node_states()->size() == 1);
    RawDb raw(path);
    REQUIRE(raw.integer("PRAGMA user_version") == 2);
}

TEST_CASE("journal: open creates the parent folders, WAL mode and schema version 2", "[journal]") {
    Scratch dir;
    const std::string path = dir.file("a/b/c/journal.db");
    { auto store = open_rw(path); }
    REQUIRE(fs::exists(path));
    RawDb raw(path);
    REQUIRE(raw.text("PRAGMA journal_mode") == "wal");
    REQUIRE(raw.integer("PRAGMA user_version") == 2);
    for (const char* table : {"runs", "stage_results", "verified", "actions", "events", "node_state", "records"})
        REQUIRE(raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") + table +
                            "'") == 1);
}

TEMPLATE_TEST_CASE("journal: reopening keeps every committed row and is idempotent", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    int64_t run = 0, action = 0;
    {
        auto store = open_rw(jb);
        run = new_run(*store);
        require_ok(store->record_stage(stage_record(run, "n1", "firmware", "h1", "verified")));
        auto a = store->begin_action(run, "n1", "firmware", "flash", "flash it");
        REQUIRE(a.ok());
        action = *a;
        require_ok(store->record_event({run, 5, "n1", "firmware", "retry", "m"}));
        require_ok(store->set_node_state({"n1", "ready", "verified", "firmware", "", 9, run}));
    }
    for (int i = 0; i < 2; ++i) {
        auto store = open_rw(jb);
        REQUIRE(store->last_verified_hash("n1", "firmware")->value() == "h1");
        auto runs = store->runs(0);
        REQUIRE(runs.ok());
        REQUIRE(runs->size() == static_cast<size_t>(1 + i));
        REQUIRE(runs->back().id == run);
        auto states = store->node_states();
        REQUIRE(states.ok());
        REQUIRE(states->size() == 1);
        REQUIRE((*states)[0].state == "ready");
        auto hist = store->history("n1", 0);
        REQUIRE(hist.ok());
        REQUIRE(hist->size() == 3);
        // Rows from before the reopen can still be finished.
        if (i == 0) require_ok(store->end_action(action, "ok", ""));
        (void)new_run(*store);
    }
}

TEST_CASE("journal: read-only open of a missing file creates nothing", "[journal]") {
    Scratch dir;
    SqliteOptions ro;
    ro.read_only = true;

    const std::string nested = dir.file("not/there/journal.db");
    auto r = open_sqlite_store(nested, ro);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().domain == "journal");
    REQUIRE(r.error().code == "journal.missing");
    REQUIRE(r.error().message.find(nested) != std::string::npos);
    REQUIRE_FALSE(fs::exists(dir.file("not")));

    const std::string flat = dir.file("journal.db");
    auto r2 = open_sqlite_store(flat, ro);
    REQUIRE_FALSE(r2.ok());
    REQUIRE(r2.error().code == "journal.missing");
    REQUIRE(fs::is_empty(dir.path()));  // no db, -wal or -shm
}

TEMPLATE_TEST_CASE("journal: read-only store reads everything and refuses every write", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    const std::string& path = jb.where();
    int64_t run = 0, action = 0;
    {
        auto store = open_rw(jb);
        run = new_run(*store);
        require_ok(store->record_stage(stage_record(run, "n1", "firmware", "h1", "verified")));
        auto a = store->begin_action(run, "n1", "firmware", "flash", "flash it");
        REQUIRE(a.ok());
        action = *a;
        require_ok(store->set_node_state({"n1", "running", "", "firmware", "", 9, run}));
    }
    auto store = open_ro(jb);
    REQUIRE(store->last_verified_hash("n1", "firmware")->value() == "h1");
    REQUIRE(store->runs(0)->size() == 1);
    REQUIRE(store->node_states()->size() == 1);
    REQUIRE(store->history("n1", 0)->size() == 2);

    auto refused = [&](const kiln::Error& e) {
        REQUIRE(e.domain == "journal");
        REQUIRE(e.code == "journal.read_only");
        REQUIRE(e.message.find(path) != std::string::npos);
    };
    auto br = store->begin_run({"apply", "", "", ""});
    REQUIRE_FALSE(br.ok());
    refused(br.error());
    auto er = store->end_run(run, "completed");
    REQUIRE_FALSE(er.ok());
    refused(er.error());
    auto rs = store->record_stage(stage_record(run, "n1", "firmware", "h2", "verified"));
    REQUIRE_FALSE(rs.ok());
    refused(rs.error());
    auto fv = store->forget_verified("n1", "");
    REQUIRE_FALSE(fv.ok());
    refused(fv.error());
    auto ba = store->begin_action(run, "n1", "firmware", "x", "y");
    REQUIRE_FALSE(ba.ok());
    refused(ba.error());
    auto ea = store->end_action(action, "ok", "");
    REQUIRE_FALSE(ea.ok());
    refused(ea.error());
    auto ev = store->record_event({run, 1, "n1", "", "k", "m"});
    REQUIRE_FALSE(ev.ok());
    refused(ev.error());
    auto ns = store->set_node_state({"n1", "ready", "", "", "", 1, run});
    REQUIRE_FALSE(ns.ok());
    refused(ns.error());

    // Nothing changed.
    REQUIRE(store->last_verified_hash("n1", "firmware")->value() == "h1");
    REQUIRE(store->runs(0)->front().status == "running");
    REQUIRE(store->node_states()->front().state == "running");
    REQUIRE(store->history("n1", 0)->size() == 2);
}

TEMPLATE_TEST_CASE("journal: a read-only store sees what a live writer commits", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto writer = open_rw(jb);
    const int64_t run = new_run(*writer);
    auto reader = open_ro(jb);
    REQUIRE(reader->node_states()->empty());
    require_ok(writer->set_node_state({"n1", "running", "", "os", "", 1, run}));
    auto states = reader->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == 1);
    REQUIRE((*states)[0].state == "running");
}

TEST_CASE("journal: a journal from a newer kiln is refused, untouched", "[journal]") {
    Scratch dir;
    const std::string path = dir.file("future.db");
    {
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
        REQUIRE(sqlite3_exec(db, "PRAGMA user_version=3", nullptr, nullptr, nullptr) == SQLITE_OK);
        sqlite3_close(db);
    }
    for (bool read_only : {false, true}) {
        SqliteOptions o;
        o.read_only = read_only;
        auto r = open_sqlite_store(path, o);
        REQUIRE_FALSE(r.ok());
        REQUIRE(r.error().domain == "journal");
        REQUIRE(r.error().code == "journal.newer");
        REQUIRE(r.error().message.find(path) != std::string::npos);
        REQUIRE(r.error().message.find('\n') == std::string::npos);
    }
    RawDb raw(path);
    REQUIRE(raw.integer("PRAGMA user_version") == 3);
    REQUIRE(raw.integer("SELECT count(*) FROM sqlite_master") == 0);  // no tables were added
    REQUIRE(raw.text("PRAGMA journal_mode") == "delete");             // nor its journal mode changed
}

TEST_CASE("journal: a file that is not a database is an error, not a crash", "[journal]") {
    Scratch dir;
    const std::string path = dir.file("garbage.db");
    {
        std::ofstream f(path);
        for (int i = 0; i < 100; ++i) f << "this is not an sqlite database at all\n";
    }
    for (bool read_only : {false, true}) {
        SqliteOptions o;
        o.read_only = read_only;
        auto r = open_sqlite_store(path, o);
        REQUIRE_FALSE(r.ok());
        REQUIRE(r.error().code == "journal.open");
        REQUIRE(r.error().message.find(path) != std::string::npos);
    }
}

TEMPLATE_TEST_CASE("journal: 8 concurrent writers all land", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    constexpr int kThreads = 8, kEach = 500, kNodesPerThread = 10;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kEach; ++i) {
                const std::string node = "t" + std::to_string(t) + "-n" + std::to_string(i % kNodesPerThread);
                if (!store->record_event({run, 0, node, "os", "progress", std::to_string(i)})) ++failures;
                if (!store->set_node_state({node, "running", std::to_string(i), "os", "", 0, run})) ++failures;
                if (i % 50 == 0 && !store->node_states()) ++failures;  // readers interleave too
            }
        });
    }
    for (auto& th : threads) th.join();
    REQUIRE(failures == 0);

    auto states = store->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == static_cast<size_t>(kThreads) * kNodesPerThread);
    for (const auto& s : *states) {
        // Each node's last write came from the last loop pass that touched it.
        const int n = std::stoi(s.node.substr(s.node.find("-n") + 2));
        REQUIRE(s.detail == std::to_string(kEach - kNodesPerThread + n));
    }
    auto hist = store->history("t3-n7", 0);
    REQUIRE(hist.ok());
    REQUIRE(hist->size() == kEach / kNodesPerThread);

    store.reset();
    REQUIRE(jb.integer("SELECT count(*) FROM events") == int64_t{kThreads} * kEach);
    REQUIRE(jb.integrity() == "ok");
}

TEMPLATE_TEST_CASE("journal: every committed row survives SIGKILL", "[journal][crash]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    constexpr int kRecords = 300;
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // Child: no Catch2 here; any failure shows as a normal exit.
        auto r = jb.open(false);
        if (!r) ::_exit(2);
        auto& s = **r;
        auto run = s.begin_run({"apply", "", "", ""});
        if (!run) ::_exit(3);
        for (int i = 0; i < kRecords; ++i) {
            const std::string node = "n" + std::to_string(i);
            if (!s.record_stage(stage_record(*run, node, "os", "h" + std::to_string(i), "verified"))) ::_exit(4);
            if (!s.record_event({*run, 0, node, "os", "stage.end", "done"})) ::_exit(5);
            if (!s.set_node_state({node, "ready", "verified", "os", "", 0, *run})) ::_exit(6);
        }
        ::kill(::getpid(), SIGKILL);  // no close, no checkpoint
        ::_exit(7);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);

    {
        REQUIRE(jb.integrity() == "ok");
        REQUIRE(jb.integer("SELECT count(*) FROM stage_results") == kRecords);
        REQUIRE(jb.integer("SELECT count(*) FROM verified") == kRecords);
        REQUIRE(jb.integer("SELECT count(*) FROM events") == kRecords);
        REQUIRE(jb.integer("SELECT count(*) FROM node_state") == kRecords);
    }
    auto store = open_rw(jb);
    for (int i = 0; i < kRecords; i += 37)
        REQUIRE(store->last_verified_hash("n" + std::to_string(i), "os")->value() == "h" + std::to_string(i));
    REQUIRE(store->runs(0)->front().status == "running");  // never ended: the child died
}

TEST_CASE("journal: SIGKILL in the middle of concurrent writes leaves a consistent file", "[journal][crash]") {
    Scratch dir;
    const std::string path = dir.file("j.db");
    constexpr int32_t kThreads = 4, kPerThread = 1'000'000;
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        auto r = open_sqlite_store(path, {});
        if (!r) ::_exit(2);
        auto& s = **r;
        auto run = s.begin_run({"apply", "", "", ""});
        if (!run) ::_exit(3);
        // Several writers, so the kill also lands inside shared transactions.
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int32_t t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                for (int32_t i = 0; i < kPerThread; ++i) {
                    const int32_t id = t * kPerThread + i;
                    const std::string node = "t" + std::to_string(t) + "-n" + std::to_string(i % 25);
                    if (!s.record_stage(stage_record(*run, node, "os", std::to_string(id), "verified"))) ::_exit(4);
                    // Tell the parent only after the call returned: committed.
                    if (::write(fds[1], &id, sizeof id) != sizeof id) ::_exit(5);
                }
            });
        }
        for (auto& th : threads) th.join();
        ::_exit(6);
    }
    ::close(fds[1]);
    // Let it commit a while, then kill it wherever it is.
    std::vector<int32_t> reported;
    int32_t v = 0;
    while (reported.size() < 1000 && ::read(fds[0], &v, sizeof v) == sizeof v) reported.push_back(v);
    std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);
    while (::read(fds[0], &v, sizeof v) == sizeof v) reported.push_back(v);  // reported before it died
    ::close(fds[0]);
    REQUIRE(reported.size() >= 1000);

    RawDb raw(path);
    REQUIRE(raw.text("PRAGMA integrity_check") == "ok");
    raw.exec("CREATE TEMP TABLE reported(h TEXT PRIMARY KEY)");
    raw.exec("BEGIN");
    for (int32_t id : reported) raw.exec("INSERT INTO reported VALUES('" + std::to_string(id) + "')");
    raw.exec("COMMIT");
    // Every call that returned is on disk...
    REQUIRE(raw.integer("SELECT count(*) FROM reported WHERE h NOT IN (SELECT input_hash FROM stage_results)") == 0);
    // ...plus at most the calls in flight (one per thread)...
    const int64_t rows = raw.integer("SELECT count(*) FROM stage_results");
    REQUIRE(rows >= static_cast<int64_t>(reported.size()));
    REQUIRE(rows <= static_cast<int64_t>(reported.size()) + kThreads);
    // ...and a record_stage's two writes never split: each node's verified
    // hash is its newest result.
    REQUIRE(raw.integer("SELECT count(*) FROM verified v WHERE v.input_hash <> (SELECT input_hash FROM stage_results s "
                        "WHERE s.node = v.node ORDER BY s.id DESC LIMIT 1)") == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM verified") ==
            raw.integer("SELECT count(DISTINCT node) FROM stage_results"));
}

TEMPLATE_TEST_CASE("journal: a failing write among concurrent ones undoes only itself", "[journal]", JOURNAL_BACKENDS) {
    NEED_BACKEND(jb);
    auto store = open_rw(jb);
    const int64_t run = new_run(*store);
    constexpr int kThreads = 8, kEach = 300;
    std::atomic<int> good_failed{0}, bad_succeeded{0}, wrong_code{0};
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            const bool bad = t % 4 == 3;  // 2 of 8 threads write only invalid rows
            for (int i = 0; i < kEach; ++i) {
                const std::string node = "t" + std::to_string(t) + "-" + std::to_string(i);
                if (bad) {
                    auto s = store->record_stage(stage_record(run + 1000, node, "os", "h", "verified"));
                    auto a = store->end_action(999'999, "ok", "");
                    if (s || a) ++bad_succeeded;
                    if (!s && s.error().code != "journal.unknown_run") ++wrong_code;
                    if (!a && a.error().code != "journal.unknown_action") ++wrong_code;
                } else {
                    auto s = store->record_stage(stage_record(run, node, "os", "h", "verified"));
                    auto a = store->begin_action(run, node, "os", "a", "d");
                    if (!s || !a) ++good_failed;
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    REQUIRE(good_failed == 0);
    REQUIRE(bad_succeeded == 0);
    REQUIRE(wrong_code == 0);

    store.reset();
    REQUIRE(jb.integer("SELECT count(*) FROM stage_results") == int64_t{6} * kEach);
    REQUIRE(jb.integer("SELECT count(*) FROM verified") == int64_t{6} * kEach);
    REQUIRE(jb.integer("SELECT count(*) FROM actions") == int64_t{6} * kEach);
    REQUIRE(jb.integer("SELECT count(*) FROM stage_results WHERE run_id <> " + std::to_string(run)) == 0);
    REQUIRE(jb.integrity() == "ok");
}

TEST_CASE("journal: the WAL is checkpointed and reused while the store is open", "[journal]") {
    Scratch dir;
    const std::string path = dir.file("j.db");
    auto store = open_rw(path);
    const int64_t run = new_run(*store);
    const auto small = fs::file_size(path);
    // Enough commits to pass the checkpoint threshold a few times over.
    const std::string message(200, 'x');
    for (int i = 0; i < 12000; ++i)
        require_ok(store->record_event({run, 0, "n" + std::to_string(i % 100), "os", "progress", message}));
    // Rows were copied into the database file while the store stayed open...
    REQUIRE(fs::file_size(path) >= small + 1'000'000);
    // ...and the log is reused after each checkpoint, not grown with the data.
    REQUIRE(fs::file_size(path + "-wal") < 40'000'000);
    REQUIRE(store->history("n7", 0)->size() == 120);
    store.reset();
    REQUIRE_FALSE(fs::exists(path + "-wal"));  // a clean close folds the log in and removes it
    RawDb raw(path);
    REQUIRE(raw.integer("SELECT count(*) FROM events") == 12000);
    REQUIRE(raw.integer("PRAGMA page_size") == 1024);
    REQUIRE(raw.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("journal: a writer locked out past the busy timeout gets a transient error", "[journal]") {
    Scratch dir;
    const std::string path = dir.file("j.db");
    { auto store = open_rw(path); }
    SqliteOptions o;
    o.busy_timeout_ms = 100;
    auto opened = open_sqlite_store(path, o);
    REQUIRE(opened.ok());
    auto& store = **opened;
    const int64_t run = new_run(store);

    RawDb other(path);  // another process's connection, holding the write lock
    other.exec("BEGIN IMMEDIATE");
    const auto t0 = std::chrono::steady_clock::now();
    auto s = store.record_event({run, 0, "n1", "os", "k", "m"});
    const auto waited = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(s.ok());
    REQUIRE(s.error().domain == "journal");
    REQUIRE(s.error().code == "journal.busy");
    REQUIRE(s.error().transient);
    REQUIRE(s.error().message.find(path) != std::string::npos);
    REQUIRE(s.error().message.find("locked") != std::string::npos);
    REQUIRE(waited >= std::chrono::milliseconds(90));  // it waited for the lock first
    REQUIRE(store.history("n1", 0)->empty());

    other.exec("COMMIT");
    require_ok(store.record_event({run, 0, "n1", "os", "k", "m"}));  // usable again
    REQUIRE(store.history("n1", 0)->size() == 1);
}
