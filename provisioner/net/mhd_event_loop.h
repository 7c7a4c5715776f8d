// A few threads serving many libmicrohttpd daemons.
//
// Why: a daemon started with MHD's internal thread costs a thread each, and
// kiln-bmc serves one daemon per emulated BMC (one port, one Redfish root
// each; firmware/bmc/bmc_server.h). Five thousand BMCs were five thousand
// threads. Here each daemon runs in MHD's external epoll mode and belongs to
// one of `threads` loops; a loop waits on the epoll descriptors of its
// daemons and runs the ones that are ready, and every daemon once a second
// for MHD's own timeouts (idle connections).
//
// A daemon shares its loop's thread with the others of that loop: a request
// that blocks (a latency fault) holds them too. kiln-bmc therefore gives
// each BMC its own loop up to its --threads (64 by default).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "provisioner/core/result.h"

struct MHD_Daemon;

namespace kiln::net {

class MhdEventLoop {
public:
    // Starts `threads` loop threads (at least one). Errors: net/loop.start.
    static Result<std::unique_ptr<MhdEventLoop>> start(int threads);
    ~MhdEventLoop();  // joins the threads; every daemon must be removed first
    MhdEventLoop(const MhdEventLoop&) = delete;
    MhdEventLoop& operator=(const MhdEventLoop&) = delete;

    // MHD flags for a daemon this loop will serve (no internal thread).
    static unsigned daemon_flags();

    // Serves `d` (started with daemon_flags()) from one of the loops, the
    // least loaded. Errors: net/loop.add.
    Status add(MHD_Daemon* d);
    // Stops serving `d`. When it returns no loop is inside `d`, so the
    // caller may MHD_stop_daemon it.
    void remove(MHD_Daemon* d);

    int threads() const { return static_cast<int>(loops_.size()); }

private:
    struct Loop {
        int epoll_fd = -1;
        int wake_fd = -1;  // eventfd: stop
        std::mutex mu;     // held while a daemon of this loop runs
        std::unordered_set<MHD_Daemon*> daemons;
        std::thread thread;
    };
    MhdEventLoop() = default;
    void run(Loop& loop);

    std::vector<std::unique_ptr<Loop>> loops_;
    std::atomic<bool> stopping_{false};
};

}  // namespace kiln::net
