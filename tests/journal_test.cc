// The SQLite journal: round trips, read-only use, versioning, concurrency,
// and durability when the writer is killed.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "provisioner/journal/sqlite_store.h"
#include "tests/support/temp_dir.h"

using kiln::journal::open_sqlite_store;
using kiln::journal::StageRecord;
using kiln::test::TempDir;

namespace {

std::unique_ptr<kiln::journal::Store> open_rw(const std::string& path) {
    auto s = open_sqlite_store(path, {});
    REQUIRE(s.ok());
    return std::move(*s);
}

StageRecord stage(int64_t run, const std::string& node, const std::string& st, const std::string& hash,
                  const std::string& outcome) {
    return {run, node, st, hash, outcome, outcome == "failed" ? "boom" : "", 1, 0, 1, 2};
}

int64_t count_rows(const std::string& path, const std::string& table) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, ("SELECT count(*) FROM " + table).c_str(), -1, &s, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    int64_t n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

std::string integrity(const std::string& path) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    std::string r = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return r;
}

}  // namespace

TEST_CASE("journal: runs, stages, actions, events and node states round-trip", "[journal]") {
    TempDir dir;
    auto st = open_rw(dir.file("j/journal.db"));  // the folder is created
    auto run = st->begin_run({"apply", "fleet.toml", "abc", "0.1.0"});
    REQUIRE(run.ok());
    auto runs = st->runs(10);
    REQUIRE(runs->size() == 1);
    CHECK(runs->front().status == "running");
    CHECK(runs->front().ended_ms == 0);
    REQUIRE(st->end_run(*run, "completed").ok());
    CHECK(st->runs(10)->front().status == "completed");
    CHECK(st->runs(10)->front().ended_ms > 0);

    auto row = st->begin_action(*run, "n1", "firmware", "flash:BIOS", "flash BIOS 2.4.1");
    REQUIRE(row.ok());
    REQUIRE(st->end_action(*row, "ok", "").ok());
    REQUIRE(st->record_event({*run, 0, "n1", "firmware", "retry", "BMC busy"}).ok());
    REQUIRE(st->set_node_state({"n1", "running", "", "firmware", "", 0, *run}).ok());
    REQUIRE(st->set_node_state({"n1", "failed", "failed", "firmware", "firmware: boom", 0, *run}).ok());
    auto states = st->node_states();
    REQUIRE(states->size() == 1);
    CHECK(states->front().state == "failed");
    CHECK(states->front().error == "firmware: boom");
    CHECK(states->front().updated_ms > 0);
}

TEST_CASE("journal: last verified hash follows verified and skipped, not failures", "[journal]") {
    TempDir dir;
    auto st = open_rw(dir.file("journal.db"));
    auto run = *st->begin_run({"apply", "f", "", ""});
    CHECK_FALSE(st->last_verified_hash("n1", "image")->has_value());
    REQUIRE(st->record_stage(stage(run, "n1", "image", "h1", "verified")).ok());
    CHECK(st->last_verified_hash("n1", "image")->value() == "h1");
    REQUIRE(st->record_stage(stage(run, "n1", "image", "h2", "failed")).ok());
    REQUIRE(st->record_stage(stage(run, "n1", "image", "h3", "interrupted")).ok());
    CHECK(st->last_verified_hash("n1", "image")->value() == "h1");
    REQUIRE(st->record_stage(stage(run, "n1", "image", "h4", "skipped")).ok());
    CHECK(st->last_verified_hash("n1", "image")->value() == "h4");
    CHECK_FALSE(st->last_verified_hash("n2", "image")->has_value());
    REQUIRE(st->record_stage(stage(run, "n1", "vm", "v1", "verified")).ok());
    REQUIRE(st->forget_verified("n1", "image").ok());
    CHECK_FALSE(st->last_verified_hash("n1", "image")->has_value());
    CHECK(st->last_verified_hash("n1", "vm")->value() == "v1");
    REQUIRE(st->forget_verified("n1", "").ok());
    CHECK_FALSE(st->last_verified_hash("n1", "vm")->has_value());
    CHECK(count_rows(dir.file("journal.db"), "stage_results") == 5);  // results are kept
}

TEST_CASE("journal: read-only opens create nothing and refuse writes", "[journal]") {
    TempDir dir;
    auto missing = open_sqlite_store(dir.file("none/journal.db"), {.read_only = true});
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().code == "journal.missing");
    CHECK_FALSE(std::filesystem::exists(dir.file("none")));

    { open_rw(dir.file("journal.db"))->begin_run({"apply", "f", "", ""}).value(); }
    auto ro = open_sqlite_store(dir.file("journal.db"), {.read_only = true});
    REQUIRE(ro.ok());
    CHECK((*ro)->runs(0)->size() == 1);
    auto w = (*ro)->begin_run({"apply", "f", "", ""});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code == "journal.read_only");
    CHECK((*ro)->set_node_state({"n", "ready", "", "", "", 0, 1}).error().code == "journal.read_only");
    CHECK((*ro)->runs(0)->size() == 1);
}

TEST_CASE("journal: data survives close and reopen", "[journal]") {
    TempDir dir;
    {
        auto st = open_rw(dir.file("journal.db"));
        auto run = *st->begin_run({"apply", "f", "", ""});
        REQUIRE(st->record_stage(stage(run, "n1", "vm", "h", "verified")).ok());
    }
    auto st = open_rw(dir.file("journal.db"));
    CHECK(st->last_verified_hash("n1", "vm")->value() == "h");
    CHECK(st->runs(0)->size() == 1);
}

TEST_CASE("journal: a journal from a newer kiln is refused", "[journal]") {
    TempDir dir;
    { open_rw(dir.file("journal.db")); }
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(dir.file("journal.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA user_version=7", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    auto r = open_sqlite_store(dir.file("journal.db"), {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "journal.newer");
    CHECK_THAT(r.error().message, Catch::Contains(dir.file("journal.db")));
    CHECK_THAT(r.error().message, Catch::Contains("schema 7"));
}

TEST_CASE("journal: history merges stages, actions and events, newest first", "[journal]") {
    TempDir dir;
    auto st = open_rw(dir.file("journal.db"));
    auto run = *st->begin_run({"apply", "f", "", ""});
    REQUIRE(st->record_event({run, 1000, "n1", "firmware", "retry", "busy"}).ok());
    auto a = *st->begin_action(run, "n1", "firmware", "flash", "flash BIOS");
    REQUIRE(st->end_action(a, "failed", "checksum mismatch").ok());
    StageRecord rec = stage(run, "n1", "firmware", "h", "failed");
    rec.started_ms = 1;
    rec.ended_ms = kiln::journal::now_ms() + 10000;  // newest
    REQUIRE(st->record_stage(rec).ok());
    REQUIRE(st->record_event({run, 2000, "n2", "", "other", "not n1"}).ok());
    auto h = st->history("n1", 0);
    REQUIRE(h.ok());
    REQUIRE(h->size() == 3);
    CHECK((*h)[0].kind == "stage");
    CHECK((*h)[0].error == "boom");
    CHECK((*h)[1].kind == "action");
    CHECK((*h)[1].outcome == "failed");
    CHECK((*h)[1].error == "checksum mismatch");
    CHECK((*h)[2].kind == "event");
    CHECK((*h)[2].text == "busy");
    CHECK(st->history("n1", 2)->size() == 2);
    CHECK(st->history("nobody", 0)->empty());
}

TEST_CASE("journal: concurrent writers all land", "[journal][threads]") {
    TempDir dir;
    auto st = open_rw(dir.file("journal.db"));
    auto run = *st->begin_run({"apply", "f", "", ""});
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 500; ++i) {
                const std::string node = "n" + std::to_string(t) + "-" + std::to_string(i % 50);
                if (!st->record_event({run, 0, node, "s", "k", "m"}).ok()) ++failures;
                if (!st->set_node_state({node, "running", "", "s", "", 0, run}).ok()) ++failures;
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(failures == 0);
    CHECK(count_rows(dir.file("journal.db"), "events") == 4000);
    CHECK(count_rows(dir.file("journal.db"), "node_state") == 400);
}

TEST_CASE("journal: committed rows survive SIGKILL of the writer", "[journal][crash]") {
    TempDir dir;
    const std::string path = dir.file("journal.db");
    const int n = 300;
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        auto s = open_sqlite_store(path, {});
        if (!s) _exit(3);
        auto run = (*s)->begin_run({"apply", "f", "", ""});
        for (int i = 0; i < n; ++i) {
            if (!(*s)->record_stage(stage(*run, "n" + std::to_string(i), "image", "h", "verified"))) _exit(4);
        }
        // Tell the parent all N are committed, then keep writing until killed.
        (void)!write(pipefd[1], "k", 1);
        for (int i = 0;; ++i) (void)(*s)->record_event({*run, 0, "n", "s", "spin", std::to_string(i)});
    }
    close(pipefd[1]);
    char c = 0;
    REQUIRE(read(pipefd[0], &c, 1) == 1);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    close(pipefd[0]);

    CHECK(integrity(path) == "ok");
    auto st = open_rw(path);
    for (int i = 0; i < n; ++i) REQUIRE(st->last_verified_hash("n" + std::to_string(i), "image")->value() == "h");
    CHECK(count_rows(path, "stage_results") == n);
}
