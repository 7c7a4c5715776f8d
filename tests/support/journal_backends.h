// The journal stores the store-generic tests run against, one type each for
// TEMPLATE_TEST_CASE: the SQLite file and a database in a throwaway
// PostgreSQL cluster. Each gives a fresh, empty journal, and raw SQL for
// checks the Store interface does not offer.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

#include "provisioner/journal/pg_store.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

namespace kiln::test {

class SqliteJournal {
public:
    SqliteJournal() : path_(dir_.file("j.db")) {}
    bool ready() const { return true; }
    const std::string& why_not() const { return why_; }
    const std::string& where() const { return path_; }

    Result<std::unique_ptr<journal::Store>> open(bool read_only) const {
        journal::SqliteOptions o;
        o.read_only = read_only;
        return journal::open_sqlite_store(path_, o);
    }
    std::string text(const std::string& sql) const {
        sqlite3* db = nullptr;
        std::string out;
        if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
            sqlite3_busy_timeout(db, 10000);
            sqlite3_stmt* s = nullptr;
            if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
                auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
                out = p ? p : "";
            }
            sqlite3_finalize(s);
        }
        sqlite3_close(db);
        return out;
    }
    int64_t integer(const std::string& sql) const { return std::stoll(text(sql)); }
    // "ok" when the store's own consistency check passes.
    std::string integrity() const { return text("PRAGMA integrity_check"); }

private:
    TempDir dir_;
    std::string path_;
    std::string why_;
};

class PgJournal {
public:
    PgJournal() {
        cluster_ = PgCluster::shared(&why_);
        if (cluster_) url_ = cluster_->create_database();
    }
    bool ready() const { return cluster_ != nullptr; }
    const std::string& why_not() const { return why_; }
    const std::string& where() const { return url_; }
    PgCluster& cluster() const { return *cluster_; }

    Result<std::unique_ptr<journal::Store>> open(bool read_only) const {
        journal::PgOptions o;
        o.read_only = read_only;
        return journal::open_pg_store(url_, o);
    }
    std::string text(const std::string& sql) const {
        PgRaw raw(url_);
        return raw.text(sql);
    }
    int64_t integer(const std::string& sql) const { return std::stoll(text(sql)); }
    // PostgreSQL keeps its own pages consistent; what we check is that the
    // journal's tables can all be read.
    std::string integrity() const {
        return text(
            "SELECT CASE WHEN (SELECT count(*) FROM runs) >= 0 AND (SELECT count(*) FROM stage_results) >= 0 "
            "AND (SELECT count(*) FROM verified) >= 0 AND (SELECT count(*) FROM actions) >= 0 THEN 'ok' END");
    }

private:
    PgCluster* cluster_ = nullptr;
    std::string url_;
    std::string why_;
};

}  // namespace kiln::test
