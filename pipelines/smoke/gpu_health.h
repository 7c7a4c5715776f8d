// What the GPU path concludes from what it could read, kept apart from CUDA
// and NVML so the CPU build compiles and tests it. Nothing here passes on
// absence: NVML that cannot be loaded, or a GPU whose state cannot be read,
// is a failure, and so are fewer usable GPUs than the VM was given.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/check.h"
#include "pipelines/smoke/nvml_loader.h"  // NvmlGpuHealth: a plain struct

namespace kiln::smoke {

// One GPU's NVML state, as read ("gpu0 0000:4f:00.0" names it in details).
struct GpuRead {
    std::string gpu;
    NvmlGpuHealth health;
};

// "row_remaps_pending" and "clock_slowdown_reasons": the count of GPUs with a
// pending or failed remap / a fault clock reason, unreadable GPUs counted as
// bad. `nvml_error` non-empty: NVML itself could not be used (both fail).
// A check no GPU reports (row remapping before Ampere) is a skip.
// Then the error counters: "retired_pages_pending" (GPUs), "retired_pages"
// (pages, both causes), "ecc_uncorrected_volatile" (since the driver loaded)
// and "ecc_uncorrected_aggregate" (over the GPUs' life), summed over GPUs; a
// GPU that cannot be read fails all four, a counter no GPU reports skips.
std::vector<Check> nvml_health_checks(const std::string& nvml_error, const std::vector<GpuRead>& reads);

// The GPUs' NVML state as read, for the report's "nvml" member (and from
// there the evidence bundle of a quarantined node): per GPU its name, UUID,
// serial and VBIOS where NVML gives them, and each counter it could read
// (null where the GPU does not support it); a GPU that could not be read
// says why. `nvml_error` non-empty: {"error": it}.
nlohmann::json gpu_state_json(const std::string& nvml_error, const std::vector<GpuRead>& reads);

// "gpu_count": the GPUs CUDA can use, held against how many the VM was
// given (`expected`; 0 = not known). `problem` says why GPUs are missing
// (no driver, a device CUDA could not read). No usable GPU always fails.
Check gpu_count_check(int usable, int expected, const std::string& model, const std::string& problem);

}  // namespace kiln::smoke
