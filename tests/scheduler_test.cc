#include <catch2/catch.hpp>

#include "provisioner/engine/scheduler.h"

using kiln::engine::Job;
using kiln::engine::Scheduler;

TEST_CASE("scheduler: global parallel limit", "[scheduler]") {
    kiln::config::Limits l;
    l.parallel = 2;
    Scheduler s(l);
    Job a{"a", "r1", {}}, b{"b", "r1", {}}, c{"c", "r2", {}};
    REQUIRE(s.blocker(a).empty());
    s.start(a);
    REQUIRE(s.blocker(b).empty());
    s.start(b);
    REQUIRE(s.blocker(c) == "parallel");
    s.finish(a);
    REQUIRE(s.blocker(c).empty());
}

TEST_CASE("scheduler: per-rack and per-resource limits name the blocker", "[scheduler]") {
    kiln::config::Limits l;
    l.parallel = 10;
    l.per_rack = 1;
    l.per_bmc = 1;
    Scheduler s(l);
    Job a{"a", "r1", {"bmc:x"}}, b{"b", "r1", {"bmc:y"}}, c{"c", "r2", {"bmc:x"}}, d{"d", "r3", {"switch:s"}};
    s.start(a);
    REQUIRE(s.blocker(b) == "rack:r1");
    REQUIRE(s.blocker(c) == "bmc:x");
    REQUIRE(s.blocker(d).empty());
    REQUIRE(s.capacity_of("switch:s") == l.per_switch);
    s.finish(a);
    REQUIRE(s.blocker(b).empty());
    REQUIRE(s.blocker(c).empty());
}

TEST_CASE("scheduler: max_unavailable holds failed nodes until released", "[scheduler]") {
    kiln::config::Limits l;
    l.parallel = 10;
    l.max_unavailable = 2;
    Scheduler s(l);
    Job a{"a", "r1", {}}, b{"b", "r1", {}}, c{"c", "r1", {}};
    s.start(a);
    s.finish(a);  // a still out of service (not released)
    s.start(b);
    s.finish(b);
    REQUIRE(s.unavailable() == 2);
    REQUIRE(s.blocker(c) == "unavailable");
    REQUIRE(s.blocker(a).empty());  // an admitted node continues its pipeline
    s.release(a.node);
    REQUIRE(s.blocker(c).empty());
}
