// Xid lines in the form the NVIDIA driver writes them (NVIDIA's Xid catalog,
// docs.nvidia.com/deploy/xid-errors, and the form quoted in public GPU health
// guides: "NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU
// has fallen off the bus."). The log below is our own, written in that form;
// no captured kernel log is in the tree.
#include <catch2/catch.hpp>

#include "pipelines/smoke/xid_log.h"
#include "tests/support/skip.h"

using namespace kiln::smoke;

namespace {
const char* kLog =
    "nvidia-nvlink: Nvlink Core is being initialized, major device number 510\n"
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.154.05\n"
    "NVRM: Xid (PCI:0000:4f:00): 13, pid=2211, name=python3, Graphics Exception: ESR 0x50de48=0x7f0e\n"
    "NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.\n"
    "NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.\n"
    "NVRM: Xid (PCI:0000:1b:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping\n"
    "NVRM: Xid (PCI:0000:1b:00): 48, pid=77, name=train, An uncorrectable double bit error\n"
    "NVRM: Xid (PCI:0000:1b:00): not-a-number, garbage\n";
}  // namespace

TEST_CASE("xid: lines are parsed with their GPU, code and message, and other lines are ignored") {
    auto events = parse_xid_events(kLog);
    REQUIRE(events.size() == 5);
    CHECK(events[0].pci == "0000:4f:00");
    CHECK(events[0].xid == 13);
    CHECK(events[0].text.rfind("pid=2211", 0) == 0);
    CHECK(events[1].pci == "0000:c6:00");
    CHECK(events[1].xid == 79);
    CHECK(events[4].xid == 48);
    CHECK(parse_xid_events("").empty());
}

TEST_CASE("xid: the codes that need service fail the node, application codes and early signals do not") {
    auto c = xid_check(parse_xid_events(kLog), "");
    CHECK(c.name == "xid_events");
    CHECK(c.compare == "<=");
    CHECK(c.figure == 3);  // 79 twice and 48; not 13 or 63
    CHECK(c.detail.find("PCI:0000:c6:00 Xid 79 x2") != std::string::npos);
    CHECK(c.detail.find("PCI:0000:4f:00 Xid 13 (not counted)") != std::string::npos);
    CHECK(c.detail.find("Xid 63 (not counted)") != std::string::npos);
    c.threshold = 0;  // the GPU profiles' ceiling
    c.judge();
    CHECK(c.verdict == Verdict::Fail);

    auto app_only = xid_check(parse_xid_events("NVRM: Xid (PCI:0000:4f:00): 31, pid=1, name=a, MMU Fault\n"), "");
    app_only.threshold = 0;
    app_only.judge();
    CHECK(app_only.figure == 0);
    CHECK(app_only.verdict == Verdict::Pass);

    auto clean = xid_check({}, "");
    CHECK(clean.detail == "no Xid since boot");
    CHECK(clean.verdict == Verdict::Pass);

    for (int code : {48, 61, 62, 64, 74, 79, 94, 95, 119, 120}) CHECK(xid_needs_service(code));
    for (int code : {13, 31, 43, 45, 63, 92}) CHECK_FALSE(xid_needs_service(code));
}

TEST_CASE("xid: a kernel log that cannot be read fails the check, never passes it") {
    auto c = xid_check({}, "/dev/kmsg: Permission denied");
    CHECK(c.verdict == Verdict::Fail);
    CHECK(c.detail.find("cannot read the kernel log") != std::string::npos);
}

TEST_CASE("xid: this machine's kernel log reads as lines") {
    std::string log, err;
    if (!read_kernel_log(&log, &err)) {
        // Not root, or /dev/kmsg restricted (dmesg_restrict): a named error,
        // and this test cannot run here.
        CHECK(err.find("/dev/kmsg") == 0);
        kiln::test::report_skipped("cannot read /dev/kmsg here: " + err);
        return;
    }
    REQUIRE_FALSE(log.empty());  // a booted kernel has logged something
    CHECK(err.empty());
    // Records are one message per line, with the "prio,seq,usec,flags;" gone.
    for (size_t at = 0, nl; (nl = log.find('\n', at)) != std::string::npos; at = nl + 1) {
        const std::string line = log.substr(at, nl - at);
        const auto semi = line.find(';');
        const auto comma = line.find(',');
        const bool header_left = comma != std::string::npos && semi != std::string::npos && comma < semi &&
                                 line.find_first_not_of("0123456789,-c+") == semi;
        CHECK_FALSE(header_left);
    }
}
