#include "provisioner/engine/open_files.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kiln::engine {

long threads_for_open_files(long limit) {
    return std::max(0L, (limit - kFilesBase) / kFilesPerThread);
}

OpenFilePlan plan_open_files(long limit, int in_flight, int core) {
    const long wanted_idle = std::min(kIdleConnectionsMax, kIdleConnectionsPerNode * in_flight);
    if (limit < 0) return {in_flight, wanted_idle};
    const long budget = std::max(0L, limit - kFilesBase);
    long idle = std::min(wanted_idle, budget * 4 / 5 / kFilesPerIdleConnection);
    long threads = std::min<long>(in_flight, (budget - idle * kFilesPerIdleConnection) / kFilesPerThread);
    const long needed = std::min(in_flight, core);
    if (threads < needed) {  // threads first: idle connections only save reconnects
        threads = std::min(needed, threads_for_open_files(limit));
        if (threads < needed) return {0, 0};
        idle = std::min(idle, (budget - threads * kFilesPerThread) / kFilesPerIdleConnection);
    }
    return {static_cast<int>(threads), idle};
}

Result<OpenFilePlan> raise_open_file_limit(int in_flight, int core, const std::string& where) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return make_error("engine", "limits.open_files",
                          fmt::format("cannot read the open-file limit: {}", std::strerror(errno)));
    if (lim.rlim_cur != lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    if (lim.rlim_cur == RLIM_INFINITY) return plan_open_files(-1, in_flight, core);
    const long limit = static_cast<long>(lim.rlim_cur);
    const OpenFilePlan plan = plan_open_files(limit, in_flight, core);
    const int needed = std::min(in_flight, core);
    if (plan.threads == 0)
        return make_error("engine", "limits.open_files",
                          fmt::format("the open-file limit (RLIMIT_NOFILE) is {}, and a run needs at least {} for "
                                      "{} worker threads: raise it (ulimit -Hn, systemd LimitNOFILE=) ({})",
                                      limit, kFilesBase + kFilesPerThread * needed, needed, where));
    return plan;
}

}  // namespace kiln::engine
