// Operating workers on a shared PostgreSQL store: `kiln workers` lists the
// live ones (and drops one whose heartbeat stopped), `kiln status` names
// each node's holder, and a worker's Prometheus metrics are scraped over
// loopback with the counts the run really produced.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "provisioner/engine/engine.h"
#include "provisioner/engine/run_metrics.h"
#include "provisioner/journal/leases.h"
#include "provisioner/journal/pg_store.h"
#include "provisioner/net/metrics_server.h"
#include "tests/support/child.h"
#include "tests/support/cli_fleet.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/test_stages.h"
#include "tests/support/wait.h"

using kiln::test::LedgerStage;
using kiln::test::PgCluster;
using kiln::test::PgRaw;
using kiln::test::run_child;
using kiln::test::RunningChild;
using kiln::test::TempDir;
using kiln::test::wait_until;

namespace {

// One HTTP/1.0 GET over loopback; returns the whole response.
std::string http_get(uint16_t port, const std::string& path) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

// The exposition text as "name{labels}" -> value; every sample line must
// parse (name, optional labels, one number), comments start with '#'.
std::map<std::string, double> parse_exposition(const std::string& text) {
    std::map<std::string, double> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        INFO(line);
        REQUIRE(space != std::string::npos);
        size_t used = 0;
        const double v = std::stod(line.substr(space + 1), &used);
        REQUIRE(used == line.size() - space - 1);
        const std::string key = line.substr(0, space);
        REQUIRE(key.find_first_of(" \t") == std::string::npos);
        out[key] = v;
    }
    return out;
}

std::vector<std::string> worker_argv(const std::string& url, const std::string& fleet, const std::string& id,
                                     const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {KILN_TEST_DRIVER, "--store", url,      "worker", fleet, "--worker-id", id,
                                     "--lease-ttl",    "2s",      "--poll", "50ms"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

nlohmann::json workers_json(const std::string& url, const std::string& fleet) {
    auto r = run_child({KILN_TEST_DRIVER, "--store", url, "workers", fleet, "--json"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("metrics: a loopback scrape after a leased run has its counts", "[worker][pg][metrics]") {
    NEED_CLUSTER(cluster);
    const auto url = cluster->create_database();
    auto store = kiln::journal::open_pg_store(url, {});
    REQUIRE(store.ok());
    auto* leases = (*store)->leases();
    REQUIRE(leases);
    TempDir dir;
    kiln::engine::StageRegistry registry;
    for (const char* name : {"alpha", "beta"}) {
        LedgerStage::Options o;
        o.name = name;
        o.ledger = dir.file("ledger");
        o.actions = 2;
        o.hands_over = std::string(name) == "beta";
        registry.add(std::make_shared<LedgerStage>(o));
    }
    const int nodes = 4;
    kiln::config::Limits limits;
    limits.parallel = 2;
    const auto fleet = kiln::test::make_fleet(nodes, 2, {"alpha", "beta"}, limits);
    kiln::engine::RunMetrics metrics(nullptr, [leases] { return leases->counters(); });
    kiln::engine::StopToken stop;
    kiln::engine::Engine engine(fleet, registry, store->get(), &metrics, stop);
    kiln::engine::RunOptions opts;
    opts.seed = 1;
    auto report = engine.run(opts);
    REQUIRE(report.ok());
    REQUIRE(report->status == kiln::engine::RunStatus::Completed);

    auto server = kiln::net::MetricsServer::start("127.0.0.1:0", [&metrics] { return metrics.render(); });
    REQUIRE(server.ok());
    const uint16_t port = (*server)->port();
    auto scrape = [&] {
        const auto response = http_get(port, "/metrics");
        REQUIRE(response.rfind("HTTP/1.", 0) == 0);
        REQUIRE(response.find(" 200 ") != std::string::npos);
        REQUIRE(response.find("text/plain; version=0.0.4") != std::string::npos);
        return parse_exposition(response.substr(response.find("\r\n\r\n") + 4));
    };
    auto m = scrape();
    CHECK(m["kiln_nodes{state=\"ready\",stage=\"beta\"}"] == nodes);
    CHECK(m.count("kiln_nodes{state=\"running\",stage=\"alpha\"}") == 0);
    for (const char* stage : {"alpha", "beta"}) {
        INFO(stage);
        const std::string s = stage;
        CHECK(m["kiln_stage_results_total{stage=\"" + s + "\",outcome=\"verified\"}"] == nodes);
        CHECK(m["kiln_stage_duration_seconds_count{stage=\"" + s + "\"}"] == nodes);
        CHECK(m["kiln_stage_duration_seconds_bucket{stage=\"" + s + "\",le=\"+Inf\"}"] == nodes);
        CHECK(m["kiln_stage_duration_seconds_sum{stage=\"" + s + "\"}"] >= 0);
        double previous = 0;
        for (double le : kiln::engine::RunMetrics::buckets()) {
            std::ostringstream k;
            k << "kiln_stage_duration_seconds_bucket{stage=\"" << s << "\",le=\"" << le << "\"}";
            INFO(k.str());
            REQUIRE(m.count(k.str()) == 1);
            CHECK(m[k.str()] >= previous);  // cumulative
            previous = m[k.str()];
        }
    }
    REQUIRE(m.count("kiln_lease_renewals_total") == 1);
    REQUIRE(m.count("kiln_lease_losses_total") == 1);

    // One lease renewed once, then taken over: the counters move by one each.
    const double renewals = m["kiln_lease_renewals_total"];
    REQUIRE(std::holds_alternative<kiln::journal::Lease>(*leases->claim("x1", "alpha", std::chrono::seconds(60))));
    REQUIRE(leases->renew(std::chrono::seconds(60))->empty());
    m = scrape();
    CHECK(m["kiln_lease_renewals_total"] == renewals + 1);
    CHECK(m["kiln_lease_losses_total"] == 0);
    PgRaw raw(url);
    REQUIRE(raw.exec("UPDATE leases SET worker = 'other', generation = generation + 1 WHERE node = 'x1'"));
    REQUIRE(*leases->renew(std::chrono::seconds(60)) == std::vector<std::string>{"x1"});
    m = scrape();
    CHECK(m["kiln_lease_losses_total"] == 1);

    REQUIRE(http_get(port, "/other").find(" 404 ") != std::string::npos);
}

TEST_CASE("metrics: a bad --metrics-listen is refused before the store is touched", "[worker][pg][metrics]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const auto fleet = kiln::test::write_cli_fleet(dir, 2);
    const auto url = cluster->create_database();
    for (const char* bad : {"localhost", "127.0.0.1:99999", "not-an-ip:80"}) {
        auto r = run_child(worker_argv(url, fleet, "w", {"--metrics-listen", bad}),
                           {{"KILN_TEST_LEDGER", dir.file("ledger")}});
        INFO(bad << ": " << r.err);
        REQUIRE(r.exit_code == 1);
        REQUIRE(r.err.find("--metrics-listen") != std::string::npos);
    }
    PgRaw raw(url);
    REQUIRE(raw.text("SELECT to_regclass('kiln_schema') IS NULL") == "t");  // nothing created
}

TEST_CASE("workers: kiln workers lists two live workers, drops a killed one, status names holders", "[worker][pg]") {
    NEED_CLUSTER(cluster);
    TempDir dir;
    const int nodes = 4;
    const auto fleet = kiln::test::write_cli_fleet(dir, nodes, "parallel = 2");
    const auto ledger = dir.file("ledger");
    const auto url = cluster->create_database();
    const std::map<std::string, std::string> env = {
        {"KILN_TEST_LEDGER", ledger}, {"KILN_TEST_ACTIONS", "2"}, {"KILN_TEST_SLEEP_MS", "250"}};
    // w2 waits at a gate until w1 is seen gone: alive, and listed alone,
    // however slow this machine is.
    const auto gate = dir.file("gate");
    auto gated = env;
    gated["KILN_TEST_GATE"] = gate;
    RunningChild w1(worker_argv(url, fleet, "w1", {"--label", "rack=r1"}), env, dir.file("w1"));
    RunningChild w2(worker_argv(url, fleet, "w2"), gated, dir.file("w2"));

    nlohmann::json listed;
    REQUIRE(wait_until(
        [&] {
            listed = workers_json(url, fleet);
            return listed["workers"].size() == 2;
        },
        60));
    INFO(listed.dump(2));
    REQUIRE(listed["fleet"] == "clitest");
    REQUIRE(listed["workers"][0]["worker"] == "w1");
    REQUIRE(listed["workers"][0]["labels"] == "rack=r1");
    REQUIRE(listed["workers"][0]["pid"] == w1.pid());
    REQUIRE(listed["workers"][1]["worker"] == "w2");
    REQUIRE(listed["workers"][1]["labels"] == "");
    REQUIRE(listed["workers"][1]["pid"] == w2.pid());
    for (const auto& w : listed["workers"]) {
        REQUIRE(w["heartbeat_age_ms"].get<int64_t>() >= 0);
        REQUIRE(w["expires_ms"].get<int64_t>() > w["heartbeat_ms"].get<int64_t>());
    }

    // `kiln status` on the shared store: the holder of a node held now.
    REQUIRE(wait_until(
        [&] {
            auto st = run_child({KILN_TEST_DRIVER, "--store", url, "status", fleet, "--json"});
            if (st.exit_code != 0) return false;
            auto j = nlohmann::json::parse(st.out);
            for (const auto& n : j["nodes"])
                if (n["worker"] == "w1" || n["worker"] == "w2") return true;
            return false;
        },
        60));
    auto text = run_child({KILN_TEST_DRIVER, "--store", url, "status", fleet});
    REQUIRE(text.exit_code == 0);
    REQUIRE(text.out.find("WORKER") != std::string::npos);

    // w1 killed: listed until its heartbeat expires (2 s ttl), then gone.
    REQUIRE(w1.signal(SIGKILL));
    bool timed_out = false;
    w1.wait(30, &timed_out);
    REQUIRE_FALSE(timed_out);
    REQUIRE(wait_until(
        [&] {
            listed = workers_json(url, fleet);
            return listed["workers"].size() == 1;
        },
        60));
    REQUIRE(listed["workers"][0]["worker"] == "w2");
    std::ofstream(gate).put('\n');

    // w2 finishes (taking w1's nodes over) and leaves the list on exit.
    auto r = w2.wait(300, &timed_out);
    INFO(r.out << r.err);
    REQUIRE_FALSE(timed_out);
    REQUIRE(r.exit_code == 0);
    REQUIRE(workers_json(url, fleet)["workers"].empty());
    auto none = run_child({KILN_TEST_DRIVER, "--store", url, "workers", fleet});
    REQUIRE(none.exit_code == 0);
    REQUIRE(none.out.find("no live workers") != std::string::npos);
}

TEST_CASE("workers: kiln workers needs a PostgreSQL store", "[worker]") {
    TempDir dir;
    const auto fleet = kiln::test::write_cli_fleet(dir, 2);
    auto r = run_child({KILN_TEST_DRIVER, "workers", fleet});
    REQUIRE(r.exit_code == 1);
    REQUIRE(r.err.find("PostgreSQL store") != std::string::npos);
}
