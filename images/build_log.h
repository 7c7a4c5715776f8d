// The builder's own record of what it did: one JSON line per layer per
// build ({"build","recipe","layer","key","status":"built"|"cached","seconds"}),
// appended to <cache>/build.log. Tests and people read it to see which
// layers a build redid and which it took from the cache.
#pragma once

#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::images {

struct BuildLogRecord {
    std::string build;  // id of one build (time + pid)
    std::string recipe;
    std::string layer;  // "base", a layer name, or "output"
    std::string key;
    std::string status;  // built | cached | failed
    double seconds = 0;
};

class BuildLog {
public:
    explicit BuildLog(std::string path) : path_(std::move(path)) {}
    const std::string& path() const { return path_; }
    Status append(const BuildLogRecord& r) const;
    std::vector<BuildLogRecord> read() const;
    // The records of the last build in the log.
    std::vector<BuildLogRecord> last_build() const;

private:
    std::string path_;
};

}  // namespace kiln::images
