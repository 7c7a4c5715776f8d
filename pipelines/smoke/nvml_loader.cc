#include "pipelines/smoke/nvml_loader.h"

#include <dlfcn.h>

#include <mutex>

namespace kiln::smoke {

namespace {
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0;
using InitFn = nvmlReturn_t (*)();
using ByPciFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using RemapFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);
using ReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
// nvmlDeviceGetTotalEccErrors(device, nvmlMemoryErrorType_t, nvmlEccCounterType_t, count)
using EccFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
// nvmlDeviceGetRetiredPages(device, nvmlPageRetirementCause_t, pageCount, addresses)
using RetiredFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*, unsigned long long*);
// nvmlDeviceGetRetiredPagesPendingStatus(device, nvmlEnableState_t*)
using PendingFn = nvmlReturn_t (*)(nvmlDevice_t, int*);
// nvmlDeviceGetName / GetUUID / GetSerial / GetVbiosVersion(device, buffer, length)
using TextFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
constexpr nvmlReturn_t kInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
constexpr int kUncorrected = 1;                // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatile = 0, kAggregate = 1;   // NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC
constexpr int kCauseSbe = 0, kCauseDbe = 1;    // NVML_PAGE_RETIREMENT_CAUSE_*

template <class F>
F sym(void* lib, const char* name) {
    return reinterpret_cast<F>(dlsym(lib, name));
}
}  // namespace

Nvml* Nvml::instance(std::string* err) {
    static std::once_flag once;
    static Nvml* nvml = nullptr;
    static std::string why;
    std::call_once(once, [] {
        void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            why = "NVML not found (libnvidia-ml.so.1): no NVIDIA driver?";
            return;
        }
        auto init = sym<InitFn>(lib, "nvmlInit_v2");
        if (!init || init() != kSuccess) {
            why = "nvmlInit failed";
            return;
        }
        nvml = new Nvml;  // lives for the process
        nvml->lib_ = lib;
    });
    if (!nvml && err) *err = why;
    return nvml;
}

NvmlGpuHealth Nvml::health(const std::string& pci_bus_id) {
    NvmlGpuHealth h;
    auto by_pci = sym<ByPciFn>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
    nvmlDevice_t dev = nullptr;
    if (!by_pci || by_pci(pci_bus_id.c_str(), &dev) != kSuccess) {
        h.error = "NVML does not know the GPU at " + pci_bus_id;
        return h;
    }
    auto text = [&](const char* fn, std::string& out) {
        char buf[128] = {};  // NVML's largest (name, UUID) fit in 96
        if (auto f = sym<TextFn>(lib_, fn); f && f(dev, buf, sizeof buf) == kSuccess) out = buf;
    };
    text("nvmlDeviceGetName", h.name);
    text("nvmlDeviceGetUUID", h.uuid);
    text("nvmlDeviceGetSerial", h.serial);
    text("nvmlDeviceGetVbiosVersion", h.vbios);
    if (auto remap = sym<RemapFn>(lib_, "nvmlDeviceGetRemappedRows")) {
        unsigned corr = 0, unc = 0;
        h.remaps_supported = remap(dev, &corr, &unc, &h.remap_pending, &h.remap_failure) == kSuccess;
    }
    auto reasons = sym<ReasonsFn>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) reasons = sym<ReasonsFn>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (reasons) h.reasons_supported = reasons(dev, &h.reasons) == kSuccess;
    if (auto ecc = sym<EccFn>(lib_, "nvmlDeviceGetTotalEccErrors"))
        h.ecc_supported = ecc(dev, kUncorrected, kVolatile, &h.ecc_uncorrected_volatile) == kSuccess &&
                          ecc(dev, kUncorrected, kAggregate, &h.ecc_uncorrected_aggregate) == kSuccess;
    auto retired = sym<RetiredFn>(lib_, "nvmlDeviceGetRetiredPages");
    auto pending = sym<PendingFn>(lib_, "nvmlDeviceGetRetiredPagesPendingStatus");
    if (retired && pending) {
        // A count of 0 asks for the size: SUCCESS (none) or INSUFFICIENT_SIZE.
        bool ok = true;
        for (int cause : {kCauseSbe, kCauseDbe}) {
            unsigned count = 0;
            unsigned long long none[1] = {};  // NVML refuses a null buffer
            const nvmlReturn_t rc = retired(dev, cause, &count, none);
            ok = ok && (rc == kSuccess || rc == kInsufficientSize);
            h.retired_pages += count;
        }
        int state = 0;
        ok = ok && pending(dev, &state) == kSuccess;
        h.retirement_supported = ok;
        h.retirement_pending = ok && state != 0;
    }
    return h;
}

}  // namespace kiln::smoke
