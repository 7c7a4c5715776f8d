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

void add(std::string& detail, const std::string& part) {
    detail += (detail.empty() ? "" : "; ") + part;
}

// A count summed over the GPUs (ceilings come from floors or the fleet).
Check counter(const char* name, const char* unit) {
    Check c = ceiling(name);
    c.unit = unit;
    return c;
}

// Page retirement and the uncorrected ECC counters. A GPU NVML cannot read
// fails every one of them (its counters are unknown, not zero); a counter no
// GPU reports (ECC off, retirement replaced by row remapping) is a skip.
std::vector<Check> error_checks(const std::vector<GpuRead>& reads, Check pending, Check retired, Check ecc_vol,
                                Check ecc_agg) {
    int pending_gpus = 0, retire_read = 0, ecc_read = 0, unreadable = 0;
    unsigned long long pages = 0, vol = 0, agg = 0;
    for (const auto& r : reads) {
        const auto& h = r.health;
        if (!h.error.empty()) {
            ++unreadable;
            for (Check* c : {&pending, &retired, &ecc_vol, &ecc_agg})
                add(c->detail, r.gpu + ": unreadable: " + h.error);
            continue;
        }
        if (h.retirement_supported) {
            ++retire_read;
            pages += h.retired_pages;
            if (h.retired_pages) add(retired.detail, r.gpu + ": " + std::to_string(h.retired_pages) + " retired");
            if (h.retirement_pending) {
                ++pending_gpus;
                add(pending.detail, r.gpu + ": a page retirement waits for a driver reload");
            }
        }
        if (h.ecc_supported) {
            ++ecc_read;
            vol += h.ecc_uncorrected_volatile;
            agg += h.ecc_uncorrected_aggregate;
            if (h.ecc_uncorrected_volatile)
                add(ecc_vol.detail,
                    r.gpu + ": " + std::to_string(h.ecc_uncorrected_volatile) + " since the driver loaded");
            if (h.ecc_uncorrected_aggregate)
                add(ecc_agg.detail, r.gpu + ": " + std::to_string(h.ecc_uncorrected_aggregate) + " over its life");
        }
    }
    pending.figure = pending_gpus + unreadable;
    retired.figure = static_cast<double>(pages);
    ecc_vol.figure = static_cast<double>(vol);
    ecc_agg.figure = static_cast<double>(agg);
    for (Check* c : {&pending, &retired, &ecc_vol, &ecc_agg}) {
        const bool read_any = (c == &pending || c == &retired) ? retire_read > 0 : ecc_read > 0;
        if (unreadable)
            c->verdict = Verdict::Fail;
        else if (!read_any) {
            c->verdict = Verdict::Skip;
            add(c->detail, c == &pending || c == &retired ? "page retirement not reported by NVML (row remapping "
                                                            "replaces it from Ampere on)"
                                                          : "ECC counters not reported by NVML (ECC off?)");
        }
    }
    return {pending, retired, ecc_vol, ecc_agg};
}

}  // namespace

nlohmann::json gpu_state_json(const std::string& nvml_error, const std::vector<GpuRead>& reads) {
    using nlohmann::json;
    if (!nvml_error.empty()) return json{{"error", nvml_error}};
    json gpus = json::array();
    for (const auto& r : reads) {
        const NvmlGpuHealth& h = r.health;
        json g = {{"gpu", r.gpu}};
        if (!h.error.empty()) {
            g["error"] = h.error;
            gpus.push_back(std::move(g));
            continue;
        }
        for (const auto& [key, value] : {std::pair{"name", &h.name}, std::pair{"uuid", &h.uuid},
                                         std::pair{"serial", &h.serial}, std::pair{"vbios", &h.vbios}})
            g[key] = value->empty() ? json(nullptr) : json(*value);
        char bits[24];
        std::snprintf(bits, sizeof bits, "0x%llx", h.reasons);
        g["row_remaps"] =
            h.remaps_supported ? json{{"pending", h.remap_pending}, {"failed", h.remap_failure}} : json(nullptr);
        g["clock_event_reasons"] =
            h.reasons_supported ? json{{"bits", bits}, {"fault", (h.reasons & kBadClockReasons) != 0}} : json(nullptr);
        g["ecc_uncorrected"] =
            h.ecc_supported ? json{{"volatile", h.ecc_uncorrected_volatile}, {"aggregate", h.ecc_uncorrected_aggregate}}
                            : json(nullptr);
        g["retired_pages"] = h.retirement_supported
                                 ? json{{"count", h.retired_pages}, {"pending", h.retirement_pending}}
                                 : json(nullptr);
        gpus.push_back(std::move(g));
    }
    return json{{"gpus", gpus}};
}

std::vector<Check> nvml_health_checks(const std::string& nvml_error, const std::vector<GpuRead>& reads) {
    Check remaps = ceiling("row_remaps_pending");
    Check clocks = ceiling("clock_slowdown_reasons");
    Check pending = ceiling("retired_pages_pending");
    Check retired = counter("retired_pages", "pages");
    Check ecc_vol = counter("ecc_uncorrected_volatile", "errors");
    Check ecc_agg = counter("ecc_uncorrected_aggregate", "errors");
    if (!nvml_error.empty() || reads.empty()) {
        std::vector<Check> all{remaps, clocks, pending, retired, ecc_vol, ecc_agg};
        for (auto& c : all) {
            c.verdict = Verdict::Fail;
            c.detail = nvml_error.empty() ? "no GPU to read" : "NVML cannot be used: " + nvml_error;
        }
        return all;
    }
    auto errors = error_checks(reads, pending, retired, ecc_vol, ecc_agg);
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
    std::vector<Check> all{remaps, clocks};
    all.insert(all.end(), errors.begin(), errors.end());
    return all;
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
    if (expected > 0)
        add(detail, std::to_string(usable) + " of the " + std::to_string(expected) + " GPUs the VM was given");
    if (!problem.empty()) add(detail, problem);
    if (usable == 0 && problem.empty()) add(detail, "no GPU");
    c.detail = detail;
    return c;
}

}  // namespace kiln::smoke
