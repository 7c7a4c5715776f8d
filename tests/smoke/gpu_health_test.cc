// The GPU path's conclusions from what it read (gpu_health.h), with the
// reads injected: no CUDA or NVML is needed to prove that an unreadable GPU
// or a missing one fails.
#include <catch2/catch.hpp>

#include "pipelines/smoke/check_json.h"
#include "pipelines/smoke/gpu_health.h"

using namespace kiln::smoke;

namespace {
GpuRead healthy(const std::string& gpu) {
    GpuRead r{gpu, {}};
    r.health.remaps_supported = true;
    r.health.reasons_supported = true;
    return r;
}
const Check& named(const std::vector<Check>& cs, const std::string& name) {
    for (const auto& c : cs)
        if (c.name == name) return c;
    FAIL("no check " << name);
    return cs.front();
}
}  // namespace

TEST_CASE("NVML health: healthy GPUs pass, a GPU whose read fails counts as bad in both checks") {
    auto ok = nvml_health_checks("", {healthy("gpu0"), healthy("gpu1")});
    CHECK(named(ok, "row_remaps_pending").verdict == Verdict::Pass);
    CHECK(named(ok, "row_remaps_pending").figure == 0);
    CHECK(named(ok, "clock_slowdown_reasons").verdict == Verdict::Pass);

    GpuRead broken{"gpu1 0000:4f:00.0", {}};
    broken.health.error = "nvmlDeviceGetHandleByPciBusId: GPU is lost";
    auto cs = nvml_health_checks("", {healthy("gpu0"), broken});
    for (const char* name : {"row_remaps_pending", "clock_slowdown_reasons"}) {
        INFO(name);
        Check c = named(cs, name);
        CHECK(c.figure == 1);
        c.threshold = 0;  // the floors' ceiling
        c.judge();
        CHECK(c.verdict == Verdict::Fail);
        CHECK(c.detail.find("gpu1 0000:4f:00.0: unreadable: ") != std::string::npos);
    }
    // Every GPU unreadable: still a failure, never "not reported".
    auto all = nvml_health_checks("", {broken});
    Check c = named(all, "row_remaps_pending");
    c.threshold = 0;
    c.judge();
    CHECK(c.verdict == Verdict::Fail);
}

TEST_CASE("NVML health: no NVML or no GPU fails, and a feature no GPU reports is a skip") {
    for (const auto& c : nvml_health_checks("libnvidia-ml.so.1: cannot open shared object file", {healthy("gpu0")})) {
        CHECK(c.verdict == Verdict::Fail);
        CHECK(c.detail.find("NVML cannot be used") != std::string::npos);
    }
    for (const auto& c : nvml_health_checks("", {})) CHECK(c.verdict == Verdict::Fail);

    GpuRead old{"gpu0", {}};  // a GPU without row remapping (before Ampere)
    old.health.reasons_supported = true;
    auto cs = nvml_health_checks("", {old});
    CHECK(named(cs, "row_remaps_pending").verdict == Verdict::Skip);
    CHECK(named(cs, "clock_slowdown_reasons").verdict == Verdict::Pass);

    GpuRead hot = healthy("gpu0");
    hot.health.reasons = 0x20;  // SW thermal slowdown
    hot.health.remap_pending = 1;
    auto bad = nvml_health_checks("", {hot});
    CHECK(named(bad, "row_remaps_pending").figure == 1);
    CHECK(named(bad, "clock_slowdown_reasons").figure == 1);
}

TEST_CASE("gpu_count: fewer usable GPUs than the VM was given fails, and none always fails") {
    Check all = gpu_count_check(8, 8, "NVIDIA H200", "");
    all.judge();
    CHECK(all.verdict == Verdict::Pass);

    Check short_one = gpu_count_check(7, 8, "NVIDIA H200", "gpu3: unspecified launch failure");
    short_one.judge();
    CHECK(short_one.verdict == Verdict::Fail);
    CHECK(short_one.detail.find("7 of the 8 GPUs") != std::string::npos);
    CHECK(short_one.detail.find("gpu3") != std::string::npos);

    Check none = gpu_count_check(0, 0, "", "no GPU: no CUDA-capable device is detected");
    none.judge();
    CHECK(none.verdict == Verdict::Fail);

    // Unknown expectation, GPUs there: a pass on what was found.
    Check unknown = gpu_count_check(2, 0, "NVIDIA A100", "");
    unknown.judge();
    CHECK(unknown.verdict == Verdict::Pass);
}

TEST_CASE("NVML error counters: summed over GPUs, held against ceilings, unknown when a GPU is unreadable") {
    GpuRead a = healthy("gpu0"), b = healthy("gpu1");
    for (GpuRead* g : {&a, &b}) {
        g->health.ecc_supported = true;
        g->health.retirement_supported = true;
    }
    auto clean = nvml_health_checks("", {a, b});
    for (const char* name :
         {"retired_pages_pending", "retired_pages", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"}) {
        INFO(name);
        Check c = named(clean, name);
        CHECK(c.verdict == Verdict::Pass);
        CHECK(c.figure == 0);
        c.threshold = 0;
        c.judge();
        CHECK(c.verdict == Verdict::Pass);
    }

    b.health.ecc_uncorrected_volatile = 2;
    b.health.ecc_uncorrected_aggregate = 5;
    a.health.ecc_uncorrected_aggregate = 1;
    a.health.retired_pages = 3;
    a.health.retirement_pending = true;
    auto cs = nvml_health_checks("", {a, b});
    CHECK(named(cs, "ecc_uncorrected_volatile").figure == 2);
    CHECK(named(cs, "ecc_uncorrected_aggregate").figure == 6);
    CHECK(named(cs, "retired_pages").figure == 3);
    CHECK(named(cs, "retired_pages_pending").figure == 1);
    CHECK(named(cs, "ecc_uncorrected_volatile").detail.find("gpu1: 2 since the driver loaded") != std::string::npos);
    CHECK(named(cs, "retired_pages_pending").detail.find("gpu0") != std::string::npos);
    Check vol = named(cs, "ecc_uncorrected_volatile");
    vol.threshold = 0;  // the GPU profiles' ceiling
    vol.judge();
    CHECK(vol.verdict == Verdict::Fail);

    // One GPU unreadable: its counters are unknown, so every counter fails
    // even with a figure of 0 from the other.
    GpuRead lost{"gpu1 0000:4f:00.0", {}};
    lost.health.error = "GPU is lost";
    for (const auto& c : nvml_health_checks("", {healthy("gpu0"), lost})) {
        if (c.name == "row_remaps_pending" || c.name == "clock_slowdown_reasons") continue;
        INFO(c.name);
        CHECK(c.verdict == Verdict::Fail);
        CHECK(c.detail.find("gpu1 0000:4f:00.0: unreadable") != std::string::npos);
    }

    // ECC off and page retirement replaced by row remapping: skips, which a
    // fleet threshold turns into failures (smoke_stage's judge).
    auto off = nvml_health_checks("", {healthy("gpu0")});
    for (const char* name :
         {"retired_pages_pending", "retired_pages", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"})
        CHECK(named(off, name).verdict == Verdict::Skip);
    CHECK(nvml_health_checks("NVML not found", {healthy("gpu0")}).size() == 6);
}

TEST_CASE(
    "NVML state for the report: each GPU's identity and counters, unsupported ones null, unreadable ones with why") {
    GpuRead a = healthy("gpu0 0000:4f:00.0");
    a.health.name = "NVIDIA H100 80GB HBM3";
    a.health.uuid = "GPU-5c3e9d0a-0b1e-4f57-9a41-3c1f0e6d2b7a";
    a.health.serial = "1654922012345";
    a.health.vbios = "96.00.74.00.01";
    a.health.remap_pending = 1;
    a.health.reasons = 0x20;  // SW thermal slowdown: a fault reason
    a.health.ecc_supported = true;
    a.health.ecc_uncorrected_aggregate = 3;
    GpuRead lost{"gpu1 0000:5f:00.0", {}};
    lost.health.error = "NVML does not know the GPU at 0000:5f:00.0";
    auto j = gpu_state_json("", {a, lost});
    REQUIRE(j["gpus"].size() == 2);
    const auto& g = j["gpus"][0];
    CHECK(g["gpu"] == "gpu0 0000:4f:00.0");
    CHECK(g["serial"] == "1654922012345");
    CHECK(g["uuid"] == "GPU-5c3e9d0a-0b1e-4f57-9a41-3c1f0e6d2b7a");
    CHECK(g["row_remaps"]["pending"] == 1);
    CHECK(g["clock_event_reasons"]["bits"] == "0x20");
    CHECK(g["clock_event_reasons"]["fault"] == true);
    CHECK(g["ecc_uncorrected"]["aggregate"] == 3);
    CHECK(g["retired_pages"].is_null());  // not supported: no figure made up
    CHECK(j["gpus"][1]["error"] == lost.health.error);
    CHECK_FALSE(j["gpus"][1].contains("serial"));
    CHECK(gpu_state_json("libnvidia-ml.so.1: cannot open", {}) ==
          nlohmann::json{{"error", "libnvidia-ml.so.1: cannot open"}});

    // It travels in the report kiln reads back (and the evidence bundle takes it from there).
    Report r;
    r.backend = "cuda";
    r.nvml = j;
    Report back;
    std::string err;
    REQUIRE(from_json(to_json(r), back, &err));
    CHECK(back.nvml == j);
    CHECK_FALSE(to_json(Report{}).contains("nvml"));
}
