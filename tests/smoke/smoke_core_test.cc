// kiln-smoke's pieces in process: the ring (uneven chunks, a stalled peer),
// the watchdog, the thresholds and the training loop's determinism.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "pipelines/smoke/check.h"
#include "pipelines/smoke/check_json.h"
#include "pipelines/smoke/cpu_checks.h"
#include "pipelines/smoke/ring_allreduce.h"
#include "pipelines/smoke/tcp_ring.h"
#include "pipelines/smoke/thresholds.h"
#include "pipelines/smoke/watchdog.h"
#include "tests/smoke/smoke_test_util.h"

using namespace kiln::smoke;
using namespace std::chrono_literals;

namespace {
Deadline in(std::chrono::milliseconds d) {
    return std::chrono::steady_clock::now() + d;
}
}  // namespace

TEST_CASE("ring all-reduce is exact for sizes that do not divide by the rank count") {
    const int n = 3;
    int base = kiln::test::free_port_range(n);
    REQUIRE(base > 0);
    std::vector<Endpoint> peers;
    for (int i = 0; i < n; ++i) peers.push_back({"127.0.0.1", base + i});
    for (size_t count : {size_t(3), size_t(7), size_t(1001)}) {
        INFO(count << " elements");
        std::vector<std::vector<float>> data(n);
        std::vector<std::string> errors(n);
        std::vector<std::thread> ts;
        for (int r = 0; r < n; ++r)
            ts.emplace_back([&, r] {
                auto ring = TcpRing::connect(r, peers, "127.0.0.1", 0, in(20s), &errors[size_t(r)]);
                if (!ring) return;
                auto& v = data[size_t(r)];
                for (size_t i = 0; i < count; ++i) v.push_back(float(r * 10 + int(i % 5)));
                if (!ring_allreduce(*ring, v, in(20s), &errors[size_t(r)])) v.clear();
            });
        for (auto& t : ts) t.join();
        for (int r = 0; r < n; ++r) {
            INFO("rank " << r << ": " << errors[size_t(r)]);
            REQUIRE(data[size_t(r)].size() == count);
            for (size_t i = 0; i < count; ++i) CHECK(data[size_t(r)][i] == float(30 + 3 * int(i % 5)));
        }
    }
}

TEST_CASE("a peer that connects and then stalls fails the exchange at its deadline") {
    int base = kiln::test::free_port_range(2);
    REQUIRE(base > 0);
    std::vector<Endpoint> peers = {{"127.0.0.1", base}, {"127.0.0.1", base + 1}};
    std::promise<void> release;
    auto released = release.get_future().share();
    std::thread silent([&] {
        std::string e;
        auto ring = TcpRing::connect(1, peers, "127.0.0.1", 0, in(20s), &e);
        released.wait();  // linked up, then says nothing
    });
    std::string err;
    auto ring = TcpRing::connect(0, peers, "127.0.0.1", 0, in(20s), &err);
    REQUIRE(ring);
    std::vector<float> v(4096, 1.0f);
    CHECK_FALSE(ring_allreduce(*ring, v, in(300ms), &err));
    CHECK(err.find("rank 1") != std::string::npos);
    release.set_value();
    silent.join();
}

namespace {

// Stands in for QEMU's user-networking hostfwd: it accepts every connection
// at once; until `open` it closes them (the guest behind it is not
// listening yet), afterwards it relays bytes to `target`.
struct Forwarder {
    int lfd = -1;
    int port = 0;
    int target = 0;
    std::atomic<bool> open{false}, stop{false};
    std::atomic<int> refused{0};
    std::thread server;
    std::vector<std::thread> threads;  // relays, started by the server only

    explicit Forwarder(int target_port) : target(target_port) {
        lfd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        socklen_t len = sizeof sa;
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
        port = ntohs(sa.sin_port);
        REQUIRE(::listen(lfd, 16) == 0);
        server = std::thread([this] { serve(); });
    }
    ~Forwarder() {
        stop = true;
        ::shutdown(lfd, SHUT_RDWR);
        ::close(lfd);
        server.join();
        for (auto& t : threads) t.join();
    }
    static void pump(int from, int to) {
        char buf[65536];
        for (;;) {
            ssize_t n = ::recv(from, buf, sizeof buf, 0);
            if (n <= 0 || ::send(to, buf, size_t(n), MSG_NOSIGNAL) != n) break;
        }
        ::shutdown(to, SHUT_WR);
    }
    void serve() {
        while (!stop) {
            int c = ::accept(lfd, nullptr, nullptr);
            if (c < 0) return;
            if (!open) {
                ++refused;
                ::close(c);
                continue;
            }
            int t = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in sa{};
            sa.sin_family = AF_INET;
            sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            sa.sin_port = htons(uint16_t(target));
            if (::connect(t, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
                ::close(c);
                ::close(t);
                continue;
            }
            threads.emplace_back([c, t] { pump(c, t); });
            threads.emplace_back([c, t] {
                pump(t, c);
                ::close(c);
                ::close(t);
            });
        }
    }
};

}  // namespace

TEST_CASE("a link through a forwarder that accepts before its peer listens is retried until the peer answers") {
    int base = kiln::test::free_port_range(2);
    REQUIRE(base > 0);
    Forwarder fwd(base + 1);  // rank 0 reaches rank 1 only through it
    std::vector<Endpoint> peers = {{"127.0.0.1", base}, {"127.0.0.1", fwd.port}};
    std::string err0, err1;
    std::vector<float> v0(1000, 1.0f), v1(1000, 2.0f);
    std::thread r0([&] {
        auto ring = TcpRing::connect(0, peers, "127.0.0.1", 0, in(20s), &err0);
        if (ring && !ring_allreduce(*ring, v0, in(20s), &err0)) v0.clear();
        if (!ring) v0.clear();
    });
    // Rank 0 meets only a closing forwarder for a while: no link yet.
    while (fwd.refused < 3) std::this_thread::sleep_for(10ms);
    fwd.open = true;
    std::thread r1([&] {
        auto ring = TcpRing::connect(1, peers, "127.0.0.1", base + 1, in(20s), &err1);
        if (ring && !ring_allreduce(*ring, v1, in(20s), &err1)) v1.clear();
        if (!ring) v1.clear();
    });
    r0.join();
    r1.join();
    INFO("rank 0: " << err0 << "; rank 1: " << err1);
    REQUIRE(v0.size() == 1000);
    REQUIRE(v1.size() == 1000);
    CHECK(v0[999] == 3.0f);
    CHECK(v1[0] == 3.0f);
}

TEST_CASE("the watchdog turns a check that never returns into a failed check") {
    std::promise<void> release;
    auto released = release.get_future().share();
    auto checks = run_bounded({"hung_a", "hung_b"}, 200ms, [released] {
        released.wait();
        return std::vector<Check>{};
    });
    REQUIRE(checks.size() == 2);
    CHECK(checks[0].name == "hung_a");
    CHECK(checks[0].verdict == Verdict::Fail);
    CHECK(checks[1].detail.find("timed out") != std::string::npos);
    CHECK(any_abandoned());
    release.set_value();  // let the abandoned thread end before the process does
}

TEST_CASE("the watchdog reports an exception as a failed check") {
    auto checks = run_bounded({"boom"}, 5s, []() -> std::vector<Check> { throw std::runtime_error("device lost"); });
    REQUIRE(checks.size() == 1);
    CHECK(checks[0].verdict == Verdict::Fail);
    CHECK(checks[0].detail.find("device lost") != std::string::npos);
}

TEST_CASE("thresholds: floors by model name overrides win bad input is refused") {
    Thresholds t;
    std::string err;
    REQUIRE(t.load_floors(R"({"profiles": {"cpu": {"x": 1}, "H100": {"x": 500}, "H200": {"x": 600}}})", &err));
    REQUIRE(t.select("NVIDIA H200 141GB HBM3e", &err));
    CHECK(t.profile() == "H200");
    CHECK(t.get("x") == 600);
    CHECK_FALSE(t.get("y"));
    REQUIRE(t.set_override("x=2.5", &err));
    CHECK(t.get("x") == 2.5);
    CHECK_FALSE(t.set_override("x=", &err));
    CHECK_FALSE(t.set_override("x=abc", &err));
    CHECK_FALSE(t.select("Tesla V100", &err));
    CHECK(err.find("known: H100, H200, cpu") != std::string::npos);
    CHECK_FALSE(t.load_floors(R"({"profiles": {"cpu": {"x": "fast"}}})", &err));
}

TEST_CASE("a check's verdict follows its threshold in either direction") {
    Check floor{"f", 10, 5.0, "GB/s", ">="};
    floor.verdict = Verdict::Pass;
    floor.judge();
    CHECK(floor.verdict == Verdict::Pass);
    Check low{"f", 1, 5.0, "GB/s", ">="};
    low.verdict = Verdict::Pass;
    low.judge();
    CHECK(low.verdict == Verdict::Fail);
    Check ceiling{"e", 3, 0.0, "count", "<="};
    ceiling.verdict = Verdict::Pass;
    ceiling.judge();
    CHECK(ceiling.verdict == Verdict::Fail);
    Report r;
    r.checks = {floor, ceiling};
    Report back;
    std::string err;
    REQUIRE(from_json(to_json(r), back, &err));
    CHECK(back.verdict() == Verdict::Fail);
    CHECK(back.checks[1].compare == "<=");
}

TEST_CASE("the CPU training loop is deterministic and its loss falls") {
    auto a = train_tiny_mlp(42, 100), b = train_tiny_mlp(42, 100);
    CHECK(a.first_loss == b.first_loss);
    CHECK(a.last_loss == b.last_loss);
    CHECK(a.last_loss < a.first_loss * 0.8);
    CHECK(allreduce_bus_factor(2) == 1.0);
    CHECK(allreduce_bus_factor(4) == 1.5);
}

TEST_CASE("a speed figure repeats its work until the minimum time and count, and keeps the best repetition") {
    // Repetitions that take 0.9, 0.5, 0.7, 0.6, 0.8, 0.4, 1.0 seconds (no
    // clock read): the stopping rule and the best-of are under test.
    const std::vector<double> times = {0.9, 0.5, 0.7, 0.6, 0.8, 0.4, 1.0};
    size_t i = 0;
    auto next = [&] { return times[i++ % times.size()]; };

    Repeat r;
    r.min_seconds = 2.0;
    r.min_reps = 3;
    auto s = repeat_best(r, next);
    CHECK(s.reps == 3);  // 2.1 s after three: both minimums met
    CHECK(s.best_seconds == 0.5);
    CHECK(s.total_seconds == Approx(2.1));

    i = 0;
    r.min_seconds = 2.5;  // three are not enough time: a fourth
    s = repeat_best(r, next);
    CHECK(s.reps == 4);
    CHECK(s.total_seconds == Approx(2.7));

    i = 0;
    r.min_seconds = 3.6;
    r.min_reps = 1;
    s = repeat_best(r, next);
    CHECK(s.reps == 6);  // 3.5 s after five, 3.9 after six
    CHECK(s.best_seconds == 0.4);

    i = 0;
    r.max_reps = 2;  // the cap wins over the minimum time
    s = repeat_best(r, next);
    CHECK(s.reps == 2);
    CHECK(describe(s) == "2 reps in 1.40 s, best 0.500 s");
}
