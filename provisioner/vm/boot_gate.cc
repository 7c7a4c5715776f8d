#include "provisioner/vm/boot_gate.h"

#include <algorithm>
#include <set>

namespace kiln::vm {

bool BootGate::claim(std::vector<Holder>& held, const std::string& vm, size_t limit, Clock::time_point until) {
    const auto now = Clock::now();
    std::erase_if(held, [now](const Holder& h) { return now >= h.until; });
    if (std::any_of(held.begin(), held.end(), [&vm](const Holder& h) { return h.vm == vm; })) return true;
    if (held.size() >= limit) return false;
    held.push_back({vm, until});
    return true;
}

std::string BootGate::take(const std::string& uri, const std::string& vm, int limit, Clock::time_point until,
                           const Booting& booting) {
    const size_t cap = static_cast<size_t>(std::max(1, limit));
    std::vector<std::string> ask;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto& held = held_[uri];
        if (claim(held, vm, cap, until)) return "";
        for (const auto& h : held)
            if (h.started) ask.push_back(h.vm);
        if (ask.empty()) return held.front().vm;
    }
    // Asked unlocked: it reads the hypervisor, which other nodes use too.
    std::set<std::string> done;
    for (const auto& a : ask)
        if (!booting(a)) done.insert(a);
    std::lock_guard<std::mutex> lock(mu_);
    auto& held = held_[uri];
    std::erase_if(held, [&done](const Holder& h) { return h.started && done.count(h.vm); });
    if (claim(held, vm, cap, until)) return "";
    return held.front().vm;
}

void BootGate::started(const std::string& uri, const std::string& vm) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& h : held_[uri])
        if (h.vm == vm) h.started = true;
}

void BootGate::release(const std::string& uri, const std::string& vm) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(held_[uri], [&vm](const Holder& h) { return h.vm == vm; });
}

}  // namespace kiln::vm
