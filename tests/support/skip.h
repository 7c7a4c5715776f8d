// A test that cannot run on this machine (no root, a missing tool) says so
// on one line that ctest's SKIP_REGULAR_EXPRESSION matches ("kiln-test-
// skipped:", set on every test executable that uses this), so ctest reports
// it as skipped, never as passed. The caller returns right after.
#pragma once

#include <cstdio>
#include <string>

namespace kiln::test {

inline void report_skipped(const std::string& why) {
    std::printf("kiln-test-skipped: %s\n", why.c_str());
    std::fflush(stdout);
}

}  // namespace kiln::test
