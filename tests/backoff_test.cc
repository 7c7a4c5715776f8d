#include <catch2/catch.hpp>

#include <set>

#include "provisioner/engine/backoff.h"

using namespace std::chrono_literals;
using kiln::engine::backoff_delay;

TEST_CASE("backoff: exponential steps jittered between half a step and a step, capped", "[backoff]") {
    std::mt19937_64 rng(42);
    for (int attempt = 1; attempt <= 12; ++attempt) {
        const int64_t step = std::min<int64_t>(100LL << (attempt - 1), 5000);
        for (int i = 0; i < 200; ++i) {
            auto d = backoff_delay(attempt, 100ms, 5000ms, rng).count();
            REQUIRE(d >= step / 2);
            REQUIRE(d <= step);
        }
    }
}

TEST_CASE("backoff: jitter spreads retries of many nodes", "[backoff]") {
    std::mt19937_64 rng(7);
    std::set<int64_t> seen;
    for (int i = 0; i < 100; ++i) seen.insert(backoff_delay(3, 1000ms, 60000ms, rng).count());
    REQUIRE(seen.size() > 50);  // 100 draws from 2001 values: collisions are rare
}

TEST_CASE("backoff: huge attempt numbers do not overflow", "[backoff]") {
    std::mt19937_64 rng(1);
    auto d = backoff_delay(1000, 2000ms, 120000ms, rng).count();
    REQUIRE(d >= 60000);
    REQUIRE(d <= 120000);
}
