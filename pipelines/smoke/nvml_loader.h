// NVML, loaded at run time from the driver (libnvidia-ml.so.1): the toolkit
// ships no nvml.h here, and a guest without the driver must still start.
// Only the calls the smoke checks need, declared by hand (NVML's stable ABI).
#pragma once

#include <string>

namespace kiln::smoke {

struct NvmlGpuHealth {
    std::string error;  // why nothing could be read ("" = read)
    // Who the GPU is, for an RMA: "" where NVML does not say.
    std::string name, uuid, serial, vbios;
    bool remaps_supported = false;
    unsigned remap_pending = 0;  // row remaps waiting for a GPU reset
    unsigned remap_failure = 0;  // a remap failed: the GPU needs service
    bool reasons_supported = false;
    unsigned long long reasons = 0;  // clocks event (throttle) reason bits
    // ECC error counters (device memory, all locations), uncorrected only:
    // since the driver loaded (volatile) and over the GPU's life (aggregate).
    bool ecc_supported = false;
    unsigned long long ecc_uncorrected_volatile = 0;
    unsigned long long ecc_uncorrected_aggregate = 0;
    // Dynamic page retirement (before Ampere; row remapping replaced it):
    // pages retired for either cause, and whether a retirement waits for a
    // driver reload.
    bool retirement_supported = false;
    unsigned retired_pages = 0;
    bool retirement_pending = false;
};

// Reasons that mean the GPU is slowed by a fault, not by idling or the
// power cap: HW slowdown, SW/HW thermal, HW power brake.
inline constexpr unsigned long long kBadClockReasons = 0x8ull | 0x20ull | 0x40ull | 0x80ull;

class Nvml {
public:
    // Loads and initialises NVML; nullptr with a reason when unavailable.
    static Nvml* instance(std::string* err);
    // `pci_bus_id` as cudaDeviceGetPCIBusId writes it.
    NvmlGpuHealth health(const std::string& pci_bus_id);

private:
    Nvml() = default;
    void* lib_ = nullptr;
};

}  // namespace kiln::smoke
