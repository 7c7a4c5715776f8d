#pragma once
// Waiting in tests for something another process or thread does. The bound
// is how long the test gives it before failing, never a delay the test
// relies on.
#include <chrono>
#include <thread>

namespace kiln::test {

// Polls `ready` until it holds (true) or `seconds` pass (false).
template <class F>
bool wait_until(F&& ready, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!ready()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

}  // namespace kiln::test
