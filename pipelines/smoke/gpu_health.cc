#include "pipelines/smoke/gpu_health.h"

#include <cstdio>

namespace kiln::smoke {

namespace {

Check ceiling(const char* name) {
    Check c;
    c.name = name;
    c.unit = "GPUs";
    c.compare = "<=";
    c.verdict = Verdict::Pass;
    return c;
}

void add(std::string& detail, const std::string& part) { detail += (detail.empty() ? "" : "; ") + part; }

}  // namespace

std::vector<Check> nvml_health_checks(const std::string& nvml_error, const std::vector<GpuRead>& reads) {
    Check remaps = ceiling("row_remaps_pending");
    Check clocks = ceiling("clock_slowdown_reasons");
    if (!nvml_error.empty() || reads.empty()) {
        remaps.verdict = clocks.verdict = Verdict::Fail;
        remaps.detail = clocks.detail =
            nvml_error.empty() ? "no GPU to read" : "NVML cannot be used: " + nvml_error;
        return {remaps, clocks};
    }
    int bad_remap = 0, bad_clock = 0, remap_read = 0, clock_read = 0;
    for (const auto& r : reads) {
        const auto& h = r.health;
        if (!h.error.empty()) {
            // Unread is not healthy: the GPU counts against both.
            ++bad_remap;
            ++bad_clock;
            add(remaps.detail, r.gpu + ": unreadable: " + h.error);
            add(clocks.detail, r.gpu + ": unreadable: " + h.error);
            continue;
        }
        if (h.remaps_supported) {
            ++remap_read;
            if (h.remap_pending || h.remap_failure) {
                ++bad_remap;
                add(remaps.detail, r.gpu + (h.remap_failure ? ": remap failed" : ": remap pending"));
            }
        }
        if (h.reasons_supported) {
            ++clock_read;
            if (h.reasons & kBadClockReasons) {
                ++bad_clock;
                char b[48];
                std::snprintf(b, sizeof b, ": reasons 0x%llx", h.reasons);
                add(clocks.detail, r.gpu + b);
            }
        }
    }
    remaps.figure = bad_remap;
    clocks.figure = bad_clock;
    // Nothing to read is a skip only when no GPU failed to be read.
    if (!remap_read && !bad_remap) {
        remaps.verdict = Verdict::Skip;
        add(remaps.detail, "row remapping not reported by NVML");
    }
    if (!clock_read && !bad_clock) {
        clocks.verdict = Verdict::Skip;
        add(clocks.detail, "clock event reasons not reported by NVML");
    }
    return {remaps, clocks};
}

Check gpu_count_check(int usable, int expected, const std::string& model, const std::string& problem) {
    Check c;
    c.name = "gpu_count";
    c.unit = "GPUs";
    c.compare = ">=";
    c.figure = usable;
    if (expected > 0) c.threshold = expected;
    c.verdict = usable > 0 && (expected <= 0 || usable >= expected) ? Verdict::Pass : Verdict::Fail;
    std::string detail = model;
    if (expected > 0) add(detail, std::to_string(usable) + " of the " + std::to_string(expected) + " GPUs the VM was given");
    if (!problem.empty()) add(detail, problem);
    if (usable == 0 && problem.empty()) add(detail, "no GPU");
    c.detail = detail;
    return c;
}

}  // namespace kiln::smoke
