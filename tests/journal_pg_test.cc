// The PostgreSQL journal's own behaviour: URLs and passwords, versioned
// migrations, read-only opens, server restarts (reconnecting), and the CLI selecting it
// (--store, the fleet's [store]). The store-generic cases run against it in
// journal_test.cc.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "provisioner/journal/pg_store.h"
#include "tests/support/child.h"
#include "tests/support/cli_fleet.h"
#include "tests/support/journal_backends.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/wait.h"

using kiln::journal::check_store_url;
using kiln::journal::open_pg_store;
using kiln::journal::PgOptions;
using kiln::journal::redact_store_url;
using kiln::test::PgCluster;
using kiln::test::PgRaw;
using kiln::test::run_child;
using kiln::test::TempDir;

TEST_CASE("pg store: a URL carrying a password is refused and never echoed", "[journal][pg]") {
    for (const std::string url :
         {"postgresql://kiln:hunter2@db.example:5432/kiln", "postgres://kiln:hunter2@db.example/kiln?sslmode=require",
          "postgresql://db.example/kiln?sslmode=require&password=hunter2&user=kiln"}) {
        auto s = check_store_url(url);
        REQUIRE_FALSE(s.ok());
        REQUIRE(s.error().code == "store.password_in_url");
        REQUIRE(s.error().message.find("hunter2") == std::string::npos);
        REQUIRE(s.error().message.find("***") != std::string::npos);
        REQUIRE(redact_store_url(url).find("hunter2") == std::string::npos);
        auto opened = open_pg_store(url, {});
        REQUIRE_FALSE(opened.ok());
        REQUIRE(opened.error().message.find("hunter2") == std::string::npos);
    }
    REQUIRE(check_store_url("postgresql://kiln@db.example:5432/kiln?sslmode=require").ok());
    REQUIRE(check_store_url("postgresql:///kiln?host=/run/kiln-pg").ok());
    auto other = check_store_url("mysql://kiln@db/kiln");
    REQUIRE_FALSE(other.ok());
    REQUIRE(other.error().code == "store.url");
}

TEST_CASE("pg store: migrations run once under concurrent opens and are versioned", "[journal][pg]") {
    NEED_CLUSTER(cluster);
    const std::string url = cluster->create_database();
    constexpr int kOpeners = 6;
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kOpeners);
    for (int i = 0; i < kOpeners; ++i)
        threads.emplace_back([&, i] {
            auto s = open_pg_store(url, {});
            if (!s) errors[static_cast<size_t>(i)] = s.error().str();
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
        INFO(e);
        REQUIRE(e.empty());
    }
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT count(*) FROM kiln_schema") == 6);
    REQUIRE(raw.integer("SELECT max(version) FROM kiln_schema") == 6);
    for (const char* table :
         {"runs", "stage_results", "verified", "actions", "events", "node_state", "leases", "records"})
        REQUIRE(raw.text(std::string("SELECT to_regclass('") + table + "') IS NOT NULL") == "t");
}

TEST_CASE("pg store: a connection dropped while the schema is migrated is made again, and the open succeeds",
          "[journal][pg]") {
    NEED_CLUSTER(cluster);
    const std::string url = cluster->create_database();
    PgRaw holder(url);
    // Another opener holds the migrate lock: ours connects, reads schema 0
    // and waits for the lock inside its migration.
    REQUIRE(holder.exec("SELECT pg_advisory_lock(1802071150, 1)"));  // kLockSpace ("kiln"), kMigrateLock
    const std::string waiting =
        "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE datname = current_database() AND "
        "application_name = 'kiln' AND wait_event_type = 'Lock'";
    std::string error;
    std::atomic<bool> done{false};
    std::thread opener([&] {
        auto s = open_pg_store(url, {});
        if (!s) error = s.error().str();
        done = true;
    });
    const int64_t first = [&] {
        int64_t pid = 0;
        kiln::test::wait_until([&] { return (pid = holder.integer(waiting)) != 0; }, 60);
        return pid;
    }();
    // The server ends that session (as a restart does) while it waits.
    if (first != 0) holder.exec("SELECT pg_terminate_backend(" + std::to_string(first) + ")");
    // The opener connects again and waits for the lock on a new session.
    int64_t second = 0;
    kiln::test::wait_until([&] { return done || ((second = holder.integer(waiting)) != 0 && second != first); }, 60);
    REQUIRE(holder.exec("SELECT pg_advisory_unlock(1802071150, 1)"));
    opener.join();
    REQUIRE(first != 0);
    INFO(error);
    REQUIRE(second != 0);
    REQUIRE(second != first);
    REQUIRE(error.empty());
    REQUIRE(holder.integer("SELECT max(version) FROM kiln_schema") == 6);
}

TEST_CASE("pg store: a read-only open of an empty database creates nothing", "[journal][pg]") {
    NEED_CLUSTER(cluster);
    const std::string url = cluster->create_database();
    PgOptions ro;
    ro.read_only = true;
    auto r = open_pg_store(url, ro);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error().code == "journal.missing");
    REQUIRE(r.error().message.find(url) != std::string::npos);
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0);
}

TEST_CASE("pg store: a schema from a newer kiln is refused, untouched", "[journal][pg]") {
    NEED_CLUSTER(cluster);
    const std::string url = cluster->create_database();
    PgRaw raw(url);
    REQUIRE(raw.exec("CREATE TABLE kiln_schema(version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)"));
    REQUIRE(raw.exec("INSERT INTO kiln_schema VALUES(99, 0)"));
    for (bool read_only : {false, true}) {
        PgOptions o;
        o.read_only = read_only;
        auto r = open_pg_store(url, o);
        REQUIRE_FALSE(r.ok());
        REQUIRE(r.error().code == "journal.newer");
        REQUIRE(r.error().message.find(url) != std::string::npos);
    }
    REQUIRE(raw.integer("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 1);
}

TEST_CASE("pg store: the password comes from env: or file:, and never shows in errors", "[journal][pg]") {
    NEED_CLUSTER(cluster);
    cluster->add_password_role("pw_kiln", "s3cret-Horse");
    const std::string db = cluster->create_database();
    const std::string url = db.substr(0, db.find("&user=")) + "&user=pw_kiln";

    PgOptions none;
    auto refused = open_pg_store(url, none);
    REQUIRE_FALSE(refused.ok());
    REQUIRE(refused.error().code == "journal.unavailable");

    ::setenv("KILN_TEST_PG_PASSWORD", "s3cret-Horse", 1);
    PgOptions env;
    env.password = *kiln::Secret::parse("env:KILN_TEST_PG_PASSWORD", "");
    auto ok = open_pg_store(url, env);
    INFO((ok ? std::string() : ok.error().str()));
    REQUIRE(ok.ok());
    REQUIRE((*ok)->begin_run({"apply", "f", "h", "v"}).ok());

    TempDir dir;
    dir.write("pw", "s3cret-Horse\n");
    PgOptions file;
    file.password = *kiln::Secret::parse("file:pw", dir.path());
    REQUIRE(open_pg_store(url, file).ok());

    ::setenv("KILN_TEST_PG_PASSWORD", "wrong-Battery", 1);
    auto wrong = open_pg_store(url, env);
    REQUIRE_FALSE(wrong.ok());
    REQUIRE(wrong.error().code == "journal.unavailable");
    REQUIRE(wrong.error().message.find("wrong-Battery") == std::string::npos);
    REQUIRE(wrong.error().message.find("s3cret") == std::string::npos);

    ::unsetenv("KILN_TEST_PG_PASSWORD");
    auto unset = open_pg_store(url, env);
    REQUIRE_FALSE(unset.ok());
    REQUIRE(unset.error().code == "journal.password");
    REQUIRE(unset.error().message.find("KILN_TEST_PG_PASSWORD") != std::string::npos);
}

TEST_CASE("pg store: a server restart is waited out within reconnect_for, then a named error", "[journal][pg]") {
    std::string why;
    auto cluster = PgCluster::start(&why);  // its own: this test stops the server
    if (!cluster) {
        kiln::test::report_skipped(why);
        return;
    }
    const std::string url = cluster->create_database();
    PgOptions brief;
    brief.reconnect_for = std::chrono::milliseconds(300);
    auto store = open_pg_store(url, brief);
    REQUIRE(store.ok());
    auto run = (*store)->begin_run({"apply", "f", "h", "v"});
    REQUIRE(run.ok());
    REQUIRE((*store)->set_node_state({"n1", "running", "", "alpha", "", 0, *run}).ok());

    // Down for longer than reconnect_for: a transient error that says so.
    REQUIRE(cluster->stop());
    auto down = (*store)->set_node_state({"n1", "ready", "", "alpha", "", 0, *run});
    REQUIRE_FALSE(down.ok());
    REQUIRE(down.error().code == "journal.unavailable");
    REQUIRE(down.error().transient);
    REQUIRE(down.error().message.find("the server did not come back within") != std::string::npos);
    REQUIRE(down.error().message.find(url) != std::string::npos);

    // Back: the next call notices the dead connection before sending
    // anything and connects again; no error reaches the caller.
    REQUIRE(cluster->restart());
    REQUIRE((*store)->set_node_state({"n1", "ready", "", "alpha", "", 0, *run}).ok());
    auto states = (*store)->node_states();
    REQUIRE(states.ok());
    REQUIRE(states->size() == 1);
    REQUIRE((*states)[0].state == "ready");

    // A restart while idle, with the default window: the first call after
    // it just works, an insert included, and nothing is written twice.
    auto patient = open_pg_store(url, {});
    REQUIRE(patient.ok());
    REQUIRE(cluster->restart());
    auto action = (*patient)->begin_action(*run, "n1", "alpha", "a0", "flash");
    REQUIRE(action.ok());

    // A call made while the server is down waits for it to come back.
    REQUIRE(cluster->stop());
    std::atomic<bool> calling{false}, returned{false};
    kiln::Status ended = kiln::make_error("test", "test.not_run", "not run");
    std::thread caller([&] {
        calling = true;
        ended = (*patient)->end_action(*action, "ok", "");
        returned = true;
    });
    while (!calling) std::this_thread::yield();
    const bool returned_while_down = returned;  // it cannot succeed before the restart below
    REQUIRE(cluster->restart());
    caller.join();
    REQUIRE_FALSE(returned_while_down);
    INFO((ended ? std::string() : ended.error().str()));
    REQUIRE(ended.ok());
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT count(*) FROM actions") == 1);
    REQUIRE(raw.text("SELECT outcome FROM actions") == "ok");
    REQUIRE(raw.integer("SELECT count(*) FROM runs") == 1);
}

TEST_CASE("pg store: kiln apply, plan and status on --store and on the fleet's [store]", "[journal][pg][cli]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const std::string fleet = kiln::test::write_cli_fleet(dir, 3);
    const std::string ledger = dir.file("ledger");
    const std::string url = cluster->create_database();
    const std::map<std::string, std::string> env = {{"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_ACTIONS", "2"}};

    auto apply = run_child({KILN_TEST_DRIVER, "--store", url, "apply", fleet}, env);
    INFO(apply.out << apply.err);
    REQUIRE(apply.exit_code == 0);
    REQUIRE_FALSE(std::filesystem::exists(dir.file(".kiln/journal.db")));  // nothing went to the file
    PgRaw raw(url);
    REQUIRE(raw.integer("SELECT count(*) FROM runs WHERE status = 'completed'") == 1);
    REQUIRE(raw.integer("SELECT count(*) FROM actions WHERE outcome = 'ok'") == int64_t{3} * 4 * 2);
    REQUIRE(raw.integer("SELECT count(*) FROM node_state WHERE state = 'ready'") == 3);

    auto plan = run_child({KILN_TEST_DRIVER, "--store", url, "plan", fleet, "--detailed-exitcode"}, env);
    INFO(plan.out << plan.err);
    REQUIRE(plan.exit_code == 0);

    // The same database named by the fleet itself.
    std::string text = kiln::test::read_file(fleet);
    text += "\n[store]\nurl = \"" + url + "\"\n";
    const std::string with_store = dir.write("with-store.toml", text);
    auto status = run_child({KILN_TEST_DRIVER, "status", with_store, "--json"}, env);
    INFO(status.out << status.err);
    REQUIRE(status.exit_code == 0);
    auto j = nlohmann::json::parse(status.out);
    REQUIRE(j["nodes"].size() == 3);
    for (const auto& n : j["nodes"]) REQUIRE(n["state"] == "ready");
    auto history = run_child({KILN_TEST_DRIVER, "history", with_store, "n1", "--json"}, env);
    REQUIRE(history.exit_code == 0);
    REQUIRE(nlohmann::json::parse(history.out)["entries"].size() >= 4);

    // A PostgreSQL store takes no run lock: applies share it through node
    // leases (worker_pg_test.cc). This one finds everything converged.
    auto second = run_child({KILN_TEST_DRIVER, "apply", with_store}, env);
    INFO(second.out << second.err);
    REQUIRE(second.exit_code == 0);
    REQUIRE(raw.integer("SELECT count(*) FROM actions") == int64_t{3} * 4 * 2);
    REQUIRE(raw.integer("SELECT count(*) FROM leases WHERE worker <> ''") == 0);
}

TEST_CASE("pg store: the CLI refuses a --store URL with a password without echoing it", "[journal][pg][cli]") {
    TempDir dir;
    const std::string fleet = kiln::test::write_cli_fleet(dir, 1);
    auto r = run_child({KILN_TEST_DRIVER, "--store", "postgresql://kiln:hunter2@127.0.0.1:1/kiln", "status", fleet});
    REQUIRE(r.exit_code == 1);
    REQUIRE(r.err.find("hunter2") == std::string::npos);
    REQUIRE(r.out.find("hunter2") == std::string::npos);
    REQUIRE(r.err.find("postgresql://kiln:***@127.0.0.1:1/kiln") != std::string::npos);

    auto both = run_child({KILN_TEST_DRIVER, "--store", "postgresql://kiln@127.0.0.1:1/kiln", "--journal",
                           dir.file("j.db"), "status", fleet});
    REQUIRE(both.exit_code == 1);
    REQUIRE(both.err.find("not both") != std::string::npos);
}
