#include "images/build_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

namespace kiln::images {

Status BuildLog::append(const BuildLogRecord& r) const {
    nlohmann::json j = {{"build", r.build}, {"recipe", r.recipe}, {"layer", r.layer},
                        {"key", r.key},     {"status", r.status}, {"seconds", r.seconds}};
    const std::string line = j.dump() + "\n";
    // O_APPEND: concurrent builds' lines never interleave within a line.
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return make_error("image", "image.build_log", "cannot open the build log " + path_);
    const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) return make_error("image", "image.build_log", "cannot write the build log " + path_);
    return ok_status();
}

std::vector<BuildLogRecord> BuildLog::read() const {
    std::vector<BuildLogRecord> out;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;
        out.push_back({j.value("build", ""), j.value("recipe", ""), j.value("layer", ""), j.value("key", ""),
                       j.value("status", ""), j.value("seconds", 0.0)});
    }
    return out;
}

std::vector<BuildLogRecord> BuildLog::last_build() const {
    auto all = read();
    if (all.empty()) return {};
    const std::string id = all.back().build;
    std::vector<BuildLogRecord> out;
    for (auto& r : all)
        if (r.build == id) out.push_back(r);
    return out;
}

}  // namespace kiln::images
