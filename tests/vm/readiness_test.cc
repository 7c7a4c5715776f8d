#include <catch2/catch.hpp>

#include "provisioner/vm/readiness.h"
#include "tests/vm/fake_hypervisor.h"

using namespace kiln;
using namespace kiln::vm;

TEST_CASE("the readiness marker is found on its own line with its JSON", "[vm][readiness]") {
    auto m = find_ready_marker("[    1.2] booting\r\nKILN_READY {\"cloud_init\":\"done\"}\r\nlogin: ");
    REQUIRE(m);
    CHECK(m->detail["cloud_init"] == "done");
    CHECK(find_ready_marker("echo KILN_READY {}\n") == std::nullopt);  // not at a line start
    CHECK(find_ready_marker("KILN_READYX {}\n") == std::nullopt);      // another word
    CHECK(find_ready_marker("KILN_READY {\"a\":1") == std::nullopt);   // line not finished
    auto bare = find_ready_marker("KILN_READY\n");
    REQUIRE(bare);
    CHECK(bare->detail.empty());
}

TEST_CASE("wait_ready returns once the marker appears and reports a stopped domain", "[vm][readiness]") {
    test::FakeHypervisor hv;
    hv.boot_output = "";  // a guest still booting
    REQUIRE(hv.define("<domain><name>kiln-n-vm0</name></domain>").ok());
    REQUIRE(hv.start("kiln-n-vm0").ok());
    int polls = 0;
    ReadyWait w;
    w.sleep = [&](std::chrono::milliseconds) {
        if (++polls == 3) hv.serial["kiln-n-vm0"] += "KILN_READY {\"n\":3}\n";
        return true;
    };
    auto r = wait_ready(hv, "kiln-n-vm0", w);
    REQUIRE(r.ok());
    CHECK(r->detail["n"] == 3);
    CHECK(polls == 3);

    hv.serial["kiln-n-vm0"] = "Kernel panic - not syncing\n";
    REQUIRE(hv.stop("kiln-n-vm0").ok());
    auto s = wait_ready(hv, "kiln-n-vm0", w);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "vm.stopped");
    CHECK(s.error().message.find("Kernel panic") != std::string::npos);
}

TEST_CASE("wait_ready ends when told to stop and at its timeout", "[vm][readiness]") {
    test::FakeHypervisor hv;
    hv.boot_output = "";  // a guest still booting
    REQUIRE(hv.define("<domain><name>kiln-n-vm0</name></domain>").ok());
    REQUIRE(hv.start("kiln-n-vm0").ok());
    ReadyWait w;
    w.sleep = [](std::chrono::milliseconds) { return false; };
    auto r = wait_ready(hv, "kiln-n-vm0", w);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "vm.interrupted");
    w.timeout = std::chrono::milliseconds(0);
    auto t = wait_ready(hv, "kiln-n-vm0", w);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == "vm.not_ready");
    CHECK(t.error().transient);
}
