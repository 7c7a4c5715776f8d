#include "provisioner/net/mhd_event_loop.h"

#include <microhttpd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace kiln::net {

namespace {

// MHD's own housekeeping (idle connection timeouts) needs a run now and
// then even on a daemon with no events.
constexpr auto kHousekeeping = std::chrono::milliseconds(1000);

}  // namespace

unsigned MhdEventLoop::daemon_flags() {
    // External epoll: MHD keeps one epoll descriptor per daemon, which the
    // loop waits on, and runs only when told.
    return MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
}

Result<std::unique_ptr<MhdEventLoop>> MhdEventLoop::start(int threads) {
    std::unique_ptr<MhdEventLoop> self(new MhdEventLoop());
    for (int i = 0; i < std::max(1, threads); ++i) {
        auto loop = std::make_unique<Loop>();
        loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        loop->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (loop->epoll_fd < 0 || loop->wake_fd < 0) {
            const std::string why = std::strerror(errno);
            if (loop->epoll_fd >= 0) close(loop->epoll_fd);
            if (loop->wake_fd >= 0) close(loop->wake_fd);
            return make_error("net", "loop.start", "cannot create an event loop: " + why);
        }
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = nullptr;  // the wake descriptor
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &ev);
        self->loops_.push_back(std::move(loop));
    }
    for (auto& loop : self->loops_) {
        Loop* l = loop.get();
        l->thread = std::thread([s = self.get(), l] { s->run(*l); });
    }
    return self;
}

MhdEventLoop::~MhdEventLoop() {
    stopping_ = true;
    for (auto& loop : loops_) {
        const uint64_t one = 1;
        (void)!write(loop->wake_fd, &one, sizeof one);
    }
    for (auto& loop : loops_) {
        if (loop->thread.joinable()) loop->thread.join();
        close(loop->epoll_fd);
        close(loop->wake_fd);
    }
}

Status MhdEventLoop::add(MHD_Daemon* d) {
    const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || info->epoll_fd < 0)
        return make_error("net", "loop.add", "the daemon was not started in external epoll mode");
    Loop* least = loops_.front().get();
    size_t least_size = SIZE_MAX;
    for (auto& loop : loops_) {
        std::lock_guard<std::mutex> lock(loop->mu);
        if (loop->daemons.size() < least_size) {
            least = loop.get();
            least_size = loop->daemons.size();
        }
    }
    std::lock_guard<std::mutex> lock(least->mu);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = d;
    if (epoll_ctl(least->epoll_fd, EPOLL_CTL_ADD, info->epoll_fd, &ev) != 0)
        return make_error("net", "loop.add", std::string("cannot watch the daemon: ") + std::strerror(errno));
    least->daemons.insert(d);
    return ok_status();
}

void MhdEventLoop::remove(MHD_Daemon* d) {
    const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    for (auto& loop : loops_) {
        // The loop runs daemons under this lock: once taken, none is inside d.
        std::lock_guard<std::mutex> lock(loop->mu);
        if (loop->daemons.erase(d) && info) epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, info->epoll_fd, nullptr);
    }
}

void MhdEventLoop::run(Loop& loop) {
    std::vector<epoll_event> events(256);
    std::vector<MHD_Daemon*> again;  // daemons MHD asked to run again at once
    std::vector<MHD_Daemon*> ready;  // this round's; kept to reuse its storage
    auto last_sweep = std::chrono::steady_clock::now();
    while (!stopping_) {
        const auto since = std::chrono::steady_clock::now() - last_sweep;
        int wait_ms =
            static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(kHousekeeping - since).count());
        if (wait_ms < 0 || !again.empty()) wait_ms = 0;
        const int n = epoll_wait(loop.epoll_fd, events.data(), static_cast<int>(events.size()), wait_ms);
        if (n < 0 && errno != EINTR) break;
        if (stopping_) break;
        std::lock_guard<std::mutex> lock(loop.mu);
        ready.clear();
        ready.swap(again);
        for (int i = 0; i < n; ++i)
            if (events[i].data.ptr) ready.push_back(static_cast<MHD_Daemon*>(events[i].data.ptr));
        const bool sweep = std::chrono::steady_clock::now() - last_sweep >= kHousekeeping;
        if (sweep) {
            ready.assign(loop.daemons.begin(), loop.daemons.end());
            last_sweep = std::chrono::steady_clock::now();
        }
        for (MHD_Daemon* d : ready) {
            if (!loop.daemons.count(d)) continue;  // removed since its event
            MHD_run(d);
            // Work MHD has in hand without a new event (buffered TLS data,
            // a resumed connection): it says so with a zero timeout.
            MHD_UNSIGNED_LONG_LONG timeout = 1;
            if (MHD_get_timeout(d, &timeout) == MHD_YES && timeout == 0) again.push_back(d);
        }
    }
}

}  // namespace kiln::net
