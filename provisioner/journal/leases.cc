#include "provisioner/journal/leases.h"

#include "provisioner/journal/store.h"

namespace kiln::journal {

Result<std::vector<LeaseRow>> Store::live_leases() {
    return make_error("journal", "journal.unsupported", "this journal is one process's own: no leases to list");
}

Result<std::vector<WorkerRow>> Store::live_workers() {
    return make_error("journal", "journal.unsupported",
                      "this journal is one process's own: workers share a PostgreSQL store (--store)");
}

LeaseHeartbeat::LeaseHeartbeat(Leases& leases, std::chrono::milliseconds ttl) : leases_(leases), ttl_(ttl) {
    // A third of the lease: two renewals may fail (a slow statement, a
    // database restart) before another worker may take a node over.
    const auto period = std::max(std::chrono::milliseconds(10), ttl / 3);
    thread_ = std::thread([this, period] {
        std::unique_lock<std::mutex> lock(mu_);
        while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
            lock.unlock();
            // Losses need no action here: the next fenced write of the
            // node's holder fails with lease.lost before any side effect.
            (void)leases_.renew(ttl_);
            lock.lock();
        }
    });
}

LeaseHeartbeat::~LeaseHeartbeat() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

}  // namespace kiln::journal
