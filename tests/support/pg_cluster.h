// A throwaway PostgreSQL cluster for tests: initdb into a fresh folder, the
// server listening only on a private unix socket (no TCP port to collide
// on), stopped and removed at the end. Under root it runs as the `postgres`
// user, since PostgreSQL refuses root. Tests that need it skip (skip.h) when
// the server binaries are missing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

struct pg_conn;  // libpq's PGconn

namespace kiln::test {

class PgCluster {
public:
    // Starts a cluster; null with `why_not` set when this machine has no
    // PostgreSQL server (or, as root, no `postgres` user).
    static std::unique_ptr<PgCluster> start(std::string* why_not);
    // One cluster per test process, started on first use.
    static PgCluster* shared(std::string* why_not);
    ~PgCluster();
    PgCluster(const PgCluster&) = delete;
    PgCluster& operator=(const PgCluster&) = delete;

    // A new, empty database; returns its URL (user postgres, trust auth).
    std::string create_database();
    std::string url(const std::string& database) const;
    const std::string& socket_dir() const { return socket_dir_; }
    // Stops the server (fast shutdown: sessions are cut) and starts it again
    // on the same data and socket.
    bool stop();
    bool restart();
    // A role that must log in with a password (scram over the socket);
    // pg_hba.conf asks it of the role named pw_kiln.
    void add_password_role(const std::string& role, const std::string& password);

private:
    PgCluster() = default;
    bool launch(std::string* why_not);

    std::unique_ptr<TempDir> dir_;
    std::string bindir_, data_, socket_dir_;
    pid_t server_ = -1;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
    bool drop_root_ = false;
    int databases_ = 0;
};

// Raw SQL for checks the Store interface does not offer.
class PgRaw {
public:
    explicit PgRaw(const std::string& url);
    ~PgRaw();
    PgRaw(const PgRaw&) = delete;
    PgRaw& operator=(const PgRaw&) = delete;
    bool ok() const;
    std::string text(const std::string& sql);  // first column of the first row ("" when none)
    int64_t integer(const std::string& sql) { return std::stoll(text(sql)); }
    bool exec(const std::string& sql);

private:
    ::pg_conn* conn_ = nullptr;
};

}  // namespace kiln::test

// In a test case: `c` is the process's shared cluster, or the case reports
// itself skipped (ctest's SKIP_REGULAR_EXPRESSION) and returns when this
// machine has no PostgreSQL server.
// NOLINTBEGIN(bugprone-macro-parentheses): `c` is the name it declares
#define NEED_CLUSTER(c)                                                  \
    std::string why_not_;                                                \
    kiln::test::PgCluster* c = kiln::test::PgCluster::shared(&why_not_); \
    if (!c) {                                                            \
        kiln::test::report_skipped(why_not_);                            \
        return;                                                          \
    }
// NOLINTEND(bugprone-macro-parentheses)
