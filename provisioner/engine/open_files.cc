#include "provisioner/engine/open_files.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kiln::engine {

long threads_for_open_files(long limit) { return std::max(0L, (limit - kFilesBase) / kFilesPerThread); }

Result<int> raise_open_file_limit(int in_flight, int core, const std::string& where) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return make_error("engine", "limits.open_files",
                          fmt::format("cannot read the open-file limit: {}", std::strerror(errno)));
    if (lim.rlim_cur != lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    if (lim.rlim_cur == RLIM_INFINITY) return in_flight;
    const long limit = static_cast<long>(lim.rlim_cur);
    const long covered = threads_for_open_files(limit);
    const int needed = std::min(in_flight, core);
    if (covered < needed)
        return make_error("engine", "limits.open_files",
                          fmt::format("the open-file limit (RLIMIT_NOFILE) is {}, and a run needs at least {} for "
                                      "{} worker threads: raise it (ulimit -Hn, systemd LimitNOFILE=) ({})",
                                      limit, kFilesBase + kFilesPerThread * needed, needed, where));
    return static_cast<int>(std::min<long>(in_flight, covered));
}

}  // namespace kiln::engine
