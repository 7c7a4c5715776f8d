#include "firmware/bmc/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "firmware/bmc/json_reader.h"

namespace kiln::bmc {

namespace fs = std::filesystem;

namespace {
const char* kFormat = "kiln-bmc-state/1";

Error write_error(const std::string& path, const std::string& what) {
    return make_error("bmc", "bmc.state_write_failed", "cannot write " + path + ": " + what);
}

Status write_all(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return make_error("bmc", "bmc.state_write_failed", std::strerror(errno));
        }
        done += static_cast<size_t>(n);
    }
    return ok_status();
}
}  // namespace

Result<std::optional<StateSnapshot>> load_state_file(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::optional<StateSnapshot>();
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("bmc", "bmc.state_unreadable", "cannot open " + path);
    std::ostringstream text;
    text << in.rdbuf();
    auto doc = parse_json(text.str(), JsonLimits{256u << 20, 64}, path);
    if (!doc) return make_error("bmc", "bmc.state_malformed", doc.error().message);
    if (!doc->is_object() || doc->value("format", "") != kFormat || !doc->contains("resources") ||
        !(*doc)["resources"].is_object()) {
        return make_error("bmc", "bmc.state_malformed", path + " is not a kiln-bmc state file (" + kFormat + ")");
    }
    StateSnapshot snap;
    snap.mockup = doc->value("mockup", "");
    for (auto& [uri, body] : (*doc)["resources"].items()) {
        if (!body.is_object()) {
            return make_error("bmc", "bmc.state_malformed", path + ": resource " + uri + " is not an object");
        }
        snap.resources[uri] = body;
    }
    if (doc->contains("emulator")) {
        if (!(*doc)["emulator"].is_object()) {
            return make_error("bmc", "bmc.state_malformed", path + ": \"emulator\" is not an object");
        }
        snap.emulator = (*doc)["emulator"];
    }
    return std::optional<StateSnapshot>(std::move(snap));
}

Status write_state_file(const std::string& path, const StateSnapshot& snapshot) {
    nlohmann::json doc = {{"format", kFormat}, {"mockup", snapshot.mockup}, {"resources", nlohmann::json::object()}};
    for (const auto& [uri, body] : snapshot.resources) doc["resources"][uri] = body;
    doc["emulator"] = snapshot.emulator;
    const std::string text = dump_json(doc) + "\n";

    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return write_error(tmp, std::strerror(errno));
    auto written = write_all(fd, text);
    if (written && ::fsync(fd) != 0) written = make_error("bmc", "bmc.state_write_failed", std::strerror(errno));
    ::close(fd);
    if (!written) {
        ::unlink(tmp.c_str());
        return write_error(tmp, written.error().message);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        return write_error(path, why);
    }
    // The rename itself is durable once the folder is synced.
    std::string dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return ok_status();
}

}  // namespace kiln::bmc
