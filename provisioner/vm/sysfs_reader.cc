#include "provisioner/vm/sysfs_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kiln::vm {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return s.substr(i);
}

std::optional<uint64_t> parse_hex(const std::string& s) {
    std::string_view v = s;
    if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) v.remove_prefix(2);
    if (v.empty()) return std::nullopt;
    uint64_t out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, 16);
    if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
    return out;
}

std::optional<int64_t> parse_int(const std::string& s) {
    if (s.empty()) return std::nullopt;
    int64_t out = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 10);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return out;
}

}  // namespace

std::string SysfsReader::path(const std::string& rel) const {
    return (root_ / rel).string();
}

bool SysfsReader::exists(const std::string& rel) const {
    std::error_code ec;
    return fs::exists(fs::symlink_status(root_ / rel, ec));
}

Error SysfsReader::missing(const std::string& rel) const {
    return make_error("sysfs", "sysfs.missing", path(rel) + ": missing");
}

Error SysfsReader::malformed(const std::string& rel, const std::string& why) const {
    return make_error("sysfs", "sysfs.malformed", path(rel) + ": " + why);
}

Result<std::optional<std::string>> SysfsReader::optional_text(const std::string& rel) const {
    auto bytes = optional_bytes(rel);
    if (!bytes) return bytes.error();
    if (!bytes->has_value()) return std::optional<std::string>{};
    return std::optional<std::string>{trim(**bytes)};
}

Result<std::optional<std::string>> SysfsReader::optional_bytes(const std::string& rel) const {
    const fs::path p = root_ / rel;
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        const int err = errno;
        std::error_code ec;
        if (!fs::exists(p, ec)) return std::optional<std::string>{};
        return make_error("sysfs", "sysfs.unreadable", path(rel) + ": " + std::strerror(err));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return make_error("sysfs", "sysfs.unreadable", path(rel) + ": read failed");
    return std::optional<std::string>{ss.str()};
}

Result<std::string> SysfsReader::text(const std::string& rel) const {
    auto r = optional_text(rel);
    if (!r) return r.error();
    if (!r->has_value()) return missing(rel);
    return std::move(**r);
}

Result<std::optional<uint64_t>> SysfsReader::optional_hex(const std::string& rel, uint64_t max) const {
    auto t = optional_text(rel);
    if (!t) return t.error();
    if (!t->has_value()) return std::optional<uint64_t>{};
    auto v = parse_hex(**t);
    if (!v || *v > max) return malformed(rel, "expected a hex number, got \"" + **t + "\"");
    return std::optional<uint64_t>{*v};
}

Result<uint64_t> SysfsReader::hex(const std::string& rel, uint64_t max) const {
    auto r = optional_hex(rel, max);
    if (!r) return r.error();
    if (!r->has_value()) return missing(rel);
    return **r;
}

Result<std::optional<int64_t>> SysfsReader::optional_integer(const std::string& rel) const {
    auto t = optional_text(rel);
    if (!t) return t.error();
    if (!t->has_value()) return std::optional<int64_t>{};
    auto v = parse_int(**t);
    if (!v) return malformed(rel, "expected an integer, got \"" + **t + "\"");
    return std::optional<int64_t>{*v};
}

Result<int64_t> SysfsReader::integer(const std::string& rel) const {
    auto r = optional_integer(rel);
    if (!r) return r.error();
    if (!r->has_value()) return missing(rel);
    return **r;
}

Result<std::optional<std::string>> SysfsReader::link_name(const std::string& rel) const {
    std::error_code ec;
    const fs::path p = root_ / rel;
    auto st = fs::symlink_status(p, ec);
    if (ec || !fs::exists(st)) return std::optional<std::string>{};
    if (!fs::is_symlink(st)) return malformed(rel, "expected a symlink");
    fs::path target = fs::read_symlink(p, ec);
    if (ec) return make_error("sysfs", "sysfs.unreadable", path(rel) + ": " + ec.message());
    std::string name = target.filename().string();
    if (name.empty() || name == "." || name == "..") return malformed(rel, "link target has no name");
    return std::optional<std::string>{name};
}

Result<fs::path> SysfsReader::resolve(const std::string& rel) const {
    std::error_code ec;
    fs::path p = fs::canonical(root_ / rel, ec);
    if (ec) {
        if (ec == std::errc::no_such_file_or_directory) return missing(rel);
        return make_error("sysfs", "sysfs.unreadable", path(rel) + ": " + ec.message());
    }
    return p;
}

Result<std::vector<std::string>> SysfsReader::list(const std::string& rel, bool optional) const {
    std::error_code ec;
    const fs::path p = root_ / rel;
    if (!fs::is_directory(p, ec)) {
        if (optional && !fs::exists(p, ec)) return std::vector<std::string>{};
        if (!fs::exists(p, ec)) return missing(rel);
        return malformed(rel, "expected a folder");
    }
    std::vector<std::string> out;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
        out.push_back(it->path().filename().string());
    }
    if (ec) return make_error("sysfs", "sysfs.unreadable", path(rel) + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

std::optional<std::vector<int>> parse_cpulist(const std::string& text) {
    std::vector<int> out;
    if (text.empty()) return out;
    std::string_view rest = text;
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view part = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        const size_t dash = part.find('-');
        auto num = [](std::string_view s) -> std::optional<int> {
            int v = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
            if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
            return v;
        };
        auto lo = num(part.substr(0, dash));
        auto hi = dash == std::string_view::npos ? lo : num(part.substr(dash + 1));
        if (!lo || !hi || *hi < *lo) return std::nullopt;
        for (int c = *lo; c <= *hi; ++c) out.push_back(c);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string format_cpulist(const std::vector<int>& cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) out += "-" + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace kiln::vm
