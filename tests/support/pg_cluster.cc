#include "tests/support/pg_cluster.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace kiln::test {

namespace fs = std::filesystem;

namespace {

std::string find_bindir() {
    if (const char* env = std::getenv("KILN_PG_BINDIR")) return env;
    std::error_code ec;
    std::string best;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
        const auto bin = e.path() / "bin";
        if (fs::exists(bin / "initdb") && fs::exists(bin / "postgres") && bin.string() > best) best = bin.string();
    }
    return best;
}

// Runs argv as the cluster's owner; returns the child's pid.
pid_t spawn(const std::vector<std::string>& argv, bool drop_root, uid_t uid, gid_t gid, const std::string& log) {
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    if (drop_root) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(126);
    }
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
    }
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
}

int wait_exit(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::unique_ptr<PgCluster> PgCluster::start(std::string* why_not) {
    std::unique_ptr<PgCluster> c(new PgCluster());
    c->bindir_ = find_bindir();
    if (c->bindir_.empty()) {
        *why_not = "no PostgreSQL server (initdb, postgres) under /usr/lib/postgresql/*/bin";
        return nullptr;
    }
    if (::geteuid() == 0) {
        const passwd* pw = ::getpwnam("postgres");
        if (!pw) {
            *why_not = "running as root and there is no postgres user to run the server as";
            return nullptr;
        }
        c->drop_root_ = true;
        c->uid_ = pw->pw_uid;
        c->gid_ = pw->pw_gid;
    }
    c->dir_ = std::make_unique<TempDir>();
    c->data_ = c->dir_->path() + "/data";
    c->socket_dir_ = c->dir_->path() + "/sock";
    fs::create_directories(c->socket_dir_);
    if (c->drop_root_) {
        if (::chown(c->dir_->path().c_str(), c->uid_, c->gid_) != 0 ||
            ::chown(c->socket_dir_.c_str(), c->uid_, c->gid_) != 0) {
            *why_not = "cannot hand the cluster's folder to the postgres user";
            return nullptr;
        }
    }
    const std::string log = c->dir_->path() + "/initdb.log";
    pid_t pid = spawn({c->bindir_ + "/initdb", "-D", c->data_, "-A", "trust", "-U", "postgres", "--no-sync",
                       "--no-locale", "-E", "UTF8"},
                      c->drop_root_, c->uid_, c->gid_, log);
    if (wait_exit(pid) != 0) {
        *why_not = "initdb failed: " + read_file(log);
        return nullptr;
    }
    // A password login for the role pw_kiln (add_password_role), trust for
    // the rest: the socket is private to this test.
    std::ofstream(c->data_ + "/pg_hba.conf") << "local all pw_kiln scram-sha-256\nlocal all all trust\n";
    if (!c->launch(why_not)) return nullptr;
    return c;
}

PgCluster* PgCluster::shared(std::string* why_not) {
    static std::string reason;
    static std::unique_ptr<PgCluster> cluster = start(&reason);
    if (!cluster) *why_not = reason;
    return cluster.get();
}

bool PgCluster::launch(std::string* why_not) {
    const std::string log = dir_->path() + "/server.log";
    server_ =
        spawn({bindir_ + "/postgres", "-D", data_, "-k", socket_dir_, "-c", "listen_addresses=", "-p", "5432", "-c",
               "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off", "-c", "max_connections=200"},
              drop_root_, uid_, gid_, log);
    // Bounded wait for the server to accept connections.
    const std::string conninfo = "host=" + socket_dir_ + " port=5432 user=postgres dbname=postgres";
    for (int i = 0; i < 600; ++i) {
        if (PQping(conninfo.c_str()) == PQPING_OK) return true;
        int status = 0;
        if (::waitpid(server_, &status, WNOHANG) == server_) {
            server_ = -1;
            *why_not = "postgres exited at start: " + read_file(log);
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *why_not = "postgres did not accept connections within 30 s: " + read_file(log);
    return false;
}

bool PgCluster::stop() {
    if (server_ <= 0) return true;
    ::kill(server_, SIGINT);  // fast shutdown
    wait_exit(server_);
    server_ = -1;
    return true;
}

bool PgCluster::restart() {
    stop();
    std::string why;
    return launch(&why);
}

PgCluster::~PgCluster() {
    stop();
}

std::string PgCluster::url(const std::string& database) const {
    return "postgresql:///" + database + "?host=" + socket_dir_ + "&port=5432&user=postgres";
}

std::string PgCluster::create_database() {
    const std::string name = "kiln_test_" + std::to_string(++databases_);
    PgRaw admin(url("postgres"));
    admin.exec("CREATE DATABASE " + name);
    return url(name);
}

void PgCluster::add_password_role(const std::string& role, const std::string& password) {
    PgRaw admin(url("postgres"));
    admin.exec("CREATE ROLE " + role + " LOGIN SUPERUSER PASSWORD '" + password + "'");
}

PgRaw::PgRaw(const std::string& url) {
    conn_ = PQconnectdb(url.c_str());
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
}

PgRaw::~PgRaw() {
    if (conn_) PQfinish(conn_);
}

bool PgRaw::ok() const {
    return conn_ && PQstatus(conn_) == CONNECTION_OK;
}

std::string PgRaw::text(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    std::string out;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    PQclear(r);
    return out;
}

bool PgRaw::exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto st = PQresultStatus(r);
    PQclear(r);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

}  // namespace kiln::test
