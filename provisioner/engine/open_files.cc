#include "provisioner/engine/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kiln::engine {

long open_files_needed(int in_flight) { return kFilesBase + kFilesPerNode * static_cast<long>(in_flight); }

Status raise_open_file_limit(int in_flight, const std::string& where) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return make_error("engine", "limits.open_files",
                          fmt::format("cannot read the open-file limit: {}", std::strerror(errno)));
    if (lim.rlim_cur != lim.rlim_max) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    const long needed = open_files_needed(in_flight);
    if (lim.rlim_cur != RLIM_INFINITY && static_cast<long>(lim.rlim_cur) < needed)
        return make_error("engine", "limits.open_files",
                          fmt::format("{} nodes in flight need about {} open files, but the hard open-file limit "
                                      "(RLIMIT_NOFILE) is {}: raise it (ulimit -Hn, systemd LimitNOFILE=) or lower "
                                      "parallel ({})",
                                      in_flight, needed, static_cast<long>(lim.rlim_cur), where));
    return ok_status();
}

}  // namespace kiln::engine
