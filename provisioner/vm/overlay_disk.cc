#include "provisioner/vm/overlay_disk.h"

#include <filesystem>
#include <fstream>
#include "provisioner/core/json_limits.h"

#include <nlohmann/json.hpp>

namespace kiln::vm {

namespace fs = std::filesystem;

namespace {

Error disk_error(const std::string& what, const CommandResult& r) {
    std::string err = r.err.substr(0, 300);
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return make_error("vm", "vm.disk", what + ": " + (r.timed_out ? "qemu-img timed out" : err));
}

}  // namespace

Status create_overlay(CommandRunner& runner, const std::string& base, const std::string& overlay) {
    std::error_code ec;
    if (!fs::is_regular_file(base, ec)) return make_error("vm", "vm.disk", "base image " + base + " does not exist");
    const std::string abs_base = fs::absolute(base, ec).string();
    CommandSpec info;
    info.argv = {"qemu-img", "info", "--output=json", abs_base};
    info.timeout = std::chrono::seconds(60);
    auto r = runner.run(info);
    if (!r) return make_error("vm", "vm.disk", "qemu-img: " + r.error().message);
    if (!r->success()) return disk_error("qemu-img info " + base, *r);
    auto parsed = parse_json_limited(r->out, "qemu-img info " + base, {}, "vm");
    if (!parsed) return make_error("vm", "vm.disk", parsed.error().message);
    const nlohmann::json& j = *parsed;
    if (!j.is_object() || !j.contains("format") || !j["format"].is_string()) {
        return make_error("vm", "vm.disk", "qemu-img info " + base + ": no format in its output");
    }
    fs::create_directories(fs::path(overlay).parent_path(), ec);
    const std::string tmp = overlay + ".tmp";
    fs::remove(tmp, ec);
    CommandSpec create;
    create.argv = {"qemu-img", "create", "-q", "-f", "qcow2", "-F", j["format"].get<std::string>(),
                   "-b",       abs_base, tmp};
    create.timeout = std::chrono::seconds(60);
    r = runner.run(create);
    if (!r) return make_error("vm", "vm.disk", "qemu-img: " + r.error().message);
    if (!r->success()) return disk_error("qemu-img create " + overlay, *r);
    // Rename over the old one: a crash leaves either disk, never half of one.
    fs::rename(tmp, overlay, ec);
    if (ec)
        return make_error("vm", "vm.disk", "cannot move the overlay into place at " + overlay + ": " + ec.message());
    return ok_status();
}

std::string base_image_identity(const std::string& base) {
    std::error_code ec;
    const auto st = fs::status(base, ec);
    if (ec || !fs::is_regular_file(st)) return "";
    std::ifstream in(base + ".manifest.json");
    if (in) {
        auto m = nlohmann::json::parse(in, nullptr, false);
        if (m.is_object() && m.contains("image_sha256") && m["image_sha256"].is_string() &&
            !m["image_sha256"].get<std::string>().empty())
            return "sha256:" + m["image_sha256"].get<std::string>();
    }
    const auto size = fs::file_size(base, ec);
    if (ec) return "";
    const auto mtime = fs::last_write_time(base, ec);
    if (ec) return "";
    return "file:" + std::to_string(size) + ":" + std::to_string(mtime.time_since_epoch().count());
}

}  // namespace kiln::vm
