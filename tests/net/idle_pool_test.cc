// IdlePool's bookkeeping, on plain ints: which item take() returns, and which
// ones put() drops for the per-key and the global caps.
#include <catch2/catch.hpp>

#include <algorithm>

#include "provisioner/net/idle_pool.h"

using kiln::net::IdlePool;

TEST_CASE("IdlePool takes the newest item of a key and nothing of another", "[net][pool]") {
    IdlePool<int> pool(4);
    CHECK(pool.put("a", 1, 10).empty());
    CHECK(pool.put("a", 2, 10).empty());
    CHECK(pool.put("b", 3, 10).empty());
    CHECK_FALSE(pool.take("c").has_value());
    CHECK(pool.take("a") == 2);
    CHECK(pool.take("a") == 1);
    CHECK_FALSE(pool.take("a").has_value());
    CHECK(pool.size() == 1);
    CHECK(pool.take("b") == 3);
    CHECK(pool.size() == 0);
}

TEST_CASE("IdlePool drops a key's oldest item past its per-key cap", "[net][pool]") {
    IdlePool<int> pool(2);
    CHECK(pool.put("a", 1, 10).empty());
    CHECK(pool.put("b", 9, 10).empty());
    CHECK(pool.put("a", 2, 10).empty());
    CHECK(pool.put("a", 3, 10) == std::vector<int>{1});
    CHECK(pool.size() == 3);
    CHECK(pool.take("b") == 9);
}

TEST_CASE("IdlePool evicts the least recently put item across keys past the capacity", "[net][pool]") {
    IdlePool<int> pool(8);
    CHECK(pool.put("a", 1, 3).empty());
    CHECK(pool.put("b", 2, 3).empty());
    CHECK(pool.put("a", 3, 3).empty());
    // "a"'s 1 is the oldest of all.
    CHECK(pool.put("c", 4, 3) == std::vector<int>{1});
    // Taking "b"'s 2 leaves 3 (a) and 4 (c); two more evict 3 then 4.
    CHECK(pool.take("b") == 2);
    CHECK(pool.put("d", 5, 3).empty());
    CHECK(pool.put("d", 6, 3) == std::vector<int>{3});
    CHECK(pool.put("e", 7, 3) == std::vector<int>{4});
    CHECK_FALSE(pool.take("a").has_value());
    CHECK_FALSE(pool.take("c").has_value());
    // A smaller capacity on the next put evicts down to it.
    CHECK(pool.put("e", 8, 1) == std::vector<int>{5, 6, 7});
    CHECK(pool.take("e") == 8);
}

TEST_CASE("IdlePool under capacity 0 keeps nothing and hands everything back", "[net][pool]") {
    IdlePool<int> pool(8);
    CHECK(pool.put("a", 1, 5).empty());
    CHECK(pool.put("b", 2, 5).empty());
    auto dropped = pool.put("c", 3, 0);
    std::sort(dropped.begin(), dropped.end());
    CHECK(dropped == std::vector<int>{1, 2, 3});
    CHECK(pool.size() == 0);
}
