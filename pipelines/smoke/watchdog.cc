#include "pipelines/smoke/watchdog.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace kiln::smoke {

namespace {
std::atomic<bool> g_abandoned{false};

struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::vector<Check> checks;
};

std::vector<Check> failed(const std::vector<std::string>& names, const std::string& why) {
    std::vector<Check> out;
    for (const auto& n : names) {
        Check c;
        c.name = n;
        c.figure = 0;
        c.verdict = Verdict::Fail;
        c.detail = why;
        out.push_back(std::move(c));
    }
    return out;
}
}  // namespace

bool any_abandoned() {
    return g_abandoned.load();
}

std::vector<Check> run_bounded(const std::vector<std::string>& expected, std::chrono::milliseconds bound, CheckFn fn) {
    auto shared = std::make_shared<Shared>();
    std::thread worker([shared, fn = std::move(fn), expected] {
        std::vector<Check> result;
        try {
            result = fn();
        } catch (const std::exception& e) {
            result = failed(expected, std::string("error: ") + e.what());
        } catch (...) {
            result = failed(expected, "error: unknown exception");
        }
        std::lock_guard lock(shared->mu);
        shared->checks = std::move(result);
        shared->done = true;
        shared->cv.notify_all();
    });
    std::unique_lock lock(shared->mu);
    if (!shared->cv.wait_for(lock, bound, [&] { return shared->done; })) {
        lock.unlock();
        worker.detach();
        g_abandoned = true;
        return failed(expected, "timed out after " + std::to_string(bound.count() / 1000.0).substr(0, 5) +
                                    " s: the check did not return (hung peer or device)");
    }
    auto out = std::move(shared->checks);
    lock.unlock();
    worker.join();
    return out;
}

}  // namespace kiln::smoke
