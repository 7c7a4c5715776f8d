// The root filesystem of one image being customised, wherever it lives:
// mounted inside a libguestfs appliance (GuestDisk) or unpacked on the
// build host (HostTree). A layer's steps and its finishing touches use only
// this, so both places run the very same steps.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::images {

struct GuestCommandResult {
    int exit_code = 0;   // 124: killed at the timeout
    std::string output;  // stdout and stderr, interleaved
};

class ImageTree {
public:
    virtual ~ImageTree() = default;

    // Paths are absolute paths inside the image; symlinks resolve inside it.
    virtual Status mkdir_p(const std::string& path) = 0;
    virtual Status write_file(const std::string& path, const std::string& content, int mode) = 0;
    virtual Status upload(const std::string& host_path, const std::string& path, int mode) = 0;
    virtual Result<std::string> read_file(const std::string& path) = 0;
    virtual Result<std::vector<std::string>> ls(const std::string& dir) = 0;
    virtual bool exists(const std::string& path) = 0;
    virtual Status rm_rf(const std::string& path) = 0;

    // `script` under /bin/sh -e inside the image (chrooted), with `env`
    // exported first; killed after `timeout`. A non-zero exit is a result.
    virtual Result<GuestCommandResult> run(const std::string& script, const std::map<std::string, std::string>& env,
                                           std::chrono::seconds timeout) = 0;
};

}  // namespace kiln::images
