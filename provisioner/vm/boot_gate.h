// How many VMs boot at once on a hypervisor without KVM.
//
// Emulated (TCG) guests booting side by side slow each other down far more
// than their share of the CPU: on the 2-core lab machine, beside two busy
// processes, four lab guests booted side by side took 690 s, where one
// booted alone took about 75 s (bench/vm measures it). Under TCG the vm
// stage therefore starts a VM only while fewer than `[vm.NAME]
// tcg_parallel_boots` (default 1) VMs it started on the same hypervisor
// are still booting: a VM stops counting once it has printed its marker,
// stopped, or run past its boot_timeout. Under KVM every VM starts at once.
// The gate is this process's: a second kiln process on the same hypervisor
// has its own.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::vm {

class BootGate {
public:
    using Clock = std::chrono::steady_clock;
    // Whether `vm`, a VM the gate let start, is still booting.
    using Booting = std::function<bool(const std::string& vm)>;

    // A turn on `uri` for `vm`, among at most `limit` VMs booting at once,
    // held until release() or `until`. Returns "" when taken (or `vm` holds
    // one already), else the VM that has waited longest among those ahead.
    // A holder not yet started() counts as booting; a started one is asked
    // through `booting`, without the lock held.
    std::string take(const std::string& uri, const std::string& vm, int limit, Clock::time_point until,
                     const Booting& booting);
    // The holder's domain is running: from now on `booting` says whether it
    // still holds its turn (until then its domain may read as shut off).
    void started(const std::string& uri, const std::string& vm);
    // `vm` has booted, or did not start: its turn ends. A no-op unless `vm`
    // holds one.
    void release(const std::string& uri, const std::string& vm);

private:
    struct Holder {
        std::string vm;
        Clock::time_point until;
        bool started = false;
    };
    // Drops expired turns; true when `vm` holds one or one is free (and
    // then takes it).
    static bool claim(std::vector<Holder>& held, const std::string& vm, size_t limit, Clock::time_point until);
    std::mutex mu_;
    std::map<std::string, std::vector<Holder>> held_;  // by hypervisor URI, oldest first
};

}  // namespace kiln::vm
